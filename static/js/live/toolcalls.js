/* The step inspector's view of an llm step's agent tool calls (workflows/engine/nodes/llm_tools.py):
 * each call of each round with its arguments, its result or error, and the tool step that ran it (its
 * run is listed in the same inspector, under the llm node). Kept apart from inspector.js, which only
 * calls these two functions. */

import { el } from "../lib/dom.js";

const TOOL_PREFIX = "tool:";

/** The calls an llm step recorded: `tool_calls` once it answered, every round's while it waits. */
function callsOf(run) {
  const out = run.output;
  if (!out || typeof out !== "object") return [];
  if (Array.isArray(out.rounds)) {
    return out.rounds.flatMap((r) => (r.calls || []).map((c) => Object.assign({ round: r.round }, c)));
  }
  return Array.isArray(out.tool_calls) ? out.tool_calls.filter((c) => c && c.round !== undefined) : [];
}

const json = (value) => JSON.stringify(value === undefined ? null : value, null, 2);

/** A section listing the tool calls of an llm step's run, or null when it made none. */
export function toolCallsSection(run) {
  const calls = callsOf(run);
  if (!calls.length) return null;
  const waiting = run.output && run.output.waiting_for_tools;
  // One block per call (the inspector is narrow: arguments and result one under the other).
  const blocks = calls.map((c) => {
    const outcome = c.error !== undefined
      ? el("pre", { class: "json error", tabindex: "0" }, c.error)
      : "result" in c ? el("pre", { class: "json", tabindex: "0" }, json(c.result)) : el("p", { class: "hint" }, "running…");
    return el("div", { class: "tool-call", dataset: { call: c.id } },
      el("p", {}, "Round " + c.round + " · ", el("strong", {}, c.name), " ",
        el("span", { class: "hint" }, c.id + (c.step ? " · step #" + c.step : ""))),
      el("h5", {}, "Arguments"), el("pre", { class: "json", tabindex: "0" }, json(c.args)),
      el("h5", {}, c.error !== undefined ? "Error" : "Result"), outcome);
  });
  return [
    el("h4", {}, "Tool calls" + (waiting ? " (waiting for the tools)" : "")),
    el("div", { class: "tool-calls" }, blocks),
  ];
}

/** The label of a run listed under a node it does not belong to itself. */
export function foreignRunLabel(run) {
  if (run.node && run.node.startsWith(TOOL_PREFIX)) return " (tool call " + run.node.split(":").pop() + ")";
  return " (compensation)";
}
