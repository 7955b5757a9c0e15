/* The step inspector: every run of the selected node (attempt, visit, status, worker, duration, input,
 * output, error, tokens and cost), a streaming llm step's reply so far, and an operator's rerun/retry
 * actions for it. */

import { byId as $, el, replaceChildren } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";
import { fmtMs, fmtTime } from "../lib/format.js";
import { foreignRunLabel, toolCallsSection } from "./toolcalls.js";

export function createInspector(page) {
  const { cfg, canvas } = page;
  let selected = null;
  let timer = 0;
  let runs = [];

  function select(id) {
    selected = id;
    canvas.cy.nodes().unselect();
    if (!id) {
      $("insp-title").textContent = "Step inspector";
      $("insp-hint").hidden = false;
      replaceChildren($("insp-runs"));
      replaceChildren($("insp-actions"));
      return;
    }
    canvas.cy.getElementById(id).select();
    const node = page.graphNodes[id] || {};
    $("insp-title").textContent = id + " · " + (node.type || "");
    $("insp-hint").hidden = true;
    replaceChildren($("insp-runs"), el("p", { class: "hint" }, "loading…"));
    renderPartial();
    load();
  }

  // A streaming llm step's reply so far (the reducer's `partials`, from socket `partial` messages),
  // above the runs: it grows as messages arrive and goes when the step's attempt ends, its output
  // then shown by the reloaded runs.
  function renderPartial() {
    const partial = selected ? (page.live().partials || {})[selected] : null;
    let box = $("insp-partial");
    if (!partial) {
      if (box) box.remove();
      return;
    }
    if (!box) {
      box = el("div", { id: "insp-partial", class: "partial", "aria-live": "polite" },
        el("h4", {}, "Reply so far (streaming)"), el("pre", { class: "json partial-text", tabindex: "0" }));
      $("insp-runs").prepend(box);
    }
    box.querySelector("pre").textContent = partial.text;
    box.dataset.chars = String(partial.chars);
  }

  function refreshSoon() {
    if (selected && !timer) timer = setTimeout(load, 300);
  }

  async function load() {
    timer = 0;
    const id = selected;
    if (!id) return;
    try {
      const data = await getJSON(cfg.urls.steps + "?node=" + encodeURIComponent(id));
      if (id !== selected) return;
      runs = data.steps || [];
      render();
    } catch (err) {
      replaceChildren($("insp-runs"), el("p", { class: "error" }, "could not load the runs: " + err.message));
    }
  }

  function renderActions() {
    const box = replaceChildren($("insp-actions"));
    if (!cfg.canOperate || !selected) return;
    const msg = el("span", { class: "hint", role: "status" });
    const node = page.graphNodes[selected] || {};
    const status = page.live().status;
    const target = selected;
    if (["failed", "cancelled", "completed"].includes(status) && !["start", "end"].includes(node.type) && runs.length) {
      box.appendChild(el("button", { type: "button", id: "btn-rerun",
        title: "A new visit of this node, from the checkpoint taken when it last started",
        onclick: () => page.act(cfg.urls.rerun, { node: target }, msg,
          "Rerun instance " + cfg.instance.id + " from node " + target + "?") }, "Rerun from " + selected));
    }
    const latest = runs.filter((r) => r.node === selected).slice(-1)[0];
    if (status === "failed" && latest && latest.status === "failed") {
      box.appendChild(el("button", { type: "button", id: "btn-retry-step",
        onclick: () => page.act(cfg.urls.retry, { step: latest.id }, msg) }, "Retry this step"));
    }
    box.appendChild(msg);
  }

  function runDetails(run, open) {
    const usage = run.usage || {};
    const comp = run.node !== selected ? foreignRunLabel(run) : "";
    const facts = [
      ["Queue", run.queue], ["Worker", run.worker || "—"], ["Started", fmtTime(run.started_at)],
      ["Finished", fmtTime(run.finished_at)],
      ["Duration", run.duration_ms === null ? "—" : fmtMs(run.duration_ms)],
      // run.tokens is the server's count (engine/usage.py, the run report's too); the in/out split only
      // where the usage has one: a sub-workflow or planner step records its child's total alone.
      ["Tokens", run.tokens ? run.tokens + (run.tokens_split ? " (" + (usage.prompt_tokens || 0) + " in, "
        + (usage.completion_tokens || 0) + " out)" : usage.child ? " (child instance #" + usage.child + ", in all)" : "")
        : "—"],
      ["Cost", run.cost_usd ? "$" + run.cost_usd.toFixed(6) : "—"],
      ["Model", usage.model || "—"],
      ["Idempotency key", run.idempotency_key],
    ];
    if (run.degraded) facts.push(["Degraded", "yes (fallback)"]);
    const parts = [
      el("summary", {}, el("span", { class: "badge status-" + run.status }, run.status),
        " visit " + run.visit + " · attempt " + run.attempt + comp),
      el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])),
      run.child ? childLink(run.child) : null,
    ];
    // The JSON blocks scroll (max-height): tabindex 0 lets keyboard users scroll them (axe: scrollable-region-focusable).
    if (run.error) {
      const rest = Object.assign({}, run.error);
      delete rest.traceback;
      parts.push(el("h4", { class: "error" }, "Error"), el("p", { class: "error" }, run.error.message || ""),
        el("pre", { class: "json", tabindex: "0" }, JSON.stringify(rest, null, 2)),
        run.error.traceback ? el("pre", { class: "traceback", tabindex: "0" }, run.error.traceback) : null);
    }
    parts.push(el("h4", {}, "Input"),
      el("pre", { class: "json", tabindex: "0" }, run.input === null ? "—" : JSON.stringify(run.input, null, 2)),
      el("h4", {}, "Output"),
      el("pre", { class: "json", tabindex: "0" }, run.output === null ? "—" : JSON.stringify(run.output, null, 2)));
    parts.push(toolCallsSection(run));
    const d = el("details", { class: "run" }, parts);
    d.open = open;
    return d;
  }

  // A subworkflow step's child instance (server-provided: dashboard/api/instance_api.py child_links),
  // with the review items that halt it.
  // A planner's child runs its plan: `plan_url` opens the recorded plan in the editor (read-only).
  function childLink(child) {
    return el("p", { class: "child-link" }, child.plan_url ? "Planned sub-workflow: " : "Sub-workflow: ",
      el("a", { href: child.url, class: "child-instance" }, "instance " + child.id),
      " (" + child.workflow + " v" + child.version + ", " + child.status + ")",
      child.plan_url ? [" · ", el("a", { href: child.plan_url, class: "child-plan" }, "the plan")] : null,
      child.reviews.map((r) => [" · ", el("a", { href: r.url, class: "error child-review" }, "review: " + r.reason)]));
  }

  function render() {
    renderActions();
    const box = replaceChildren($("insp-runs"));
    if (!runs.length) {
      box.appendChild(el("p", { class: "hint" }, "This node has not run in this instance."));
      renderPartial();
      return;
    }
    runs.slice().reverse().forEach((run, i) => box.appendChild(runDetails(run, i === 0)));
    renderPartial();
  }

  return { select, refreshSoon, renderActions, renderPartial, selected: () => selected };
}
