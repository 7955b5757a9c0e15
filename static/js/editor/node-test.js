/* The node inspector's "Test node" section: run the selected node alone on sample data (the editor's
 * unsaved graph, POST /api/workflows/<slug>/nodes/<id>/test; workflows/authoring/node_trial.py) and show its
 * rendered config (secrets stay `{{ secrets.NAME }}`), output, context updates, which outgoing edges
 * fire, or its error. Nothing is stored on the server. "Pin sample" keeps the sample (and an llm
 * node's pinned response) in the graph under the node (`sample`), saved with the next version. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { CFG, state } from "./context.js";
import { commit, setNodeField, toGraph } from "./canvas.js";
import { section } from "./forms.js";

// Kinds the server runs alone (the others wait for a person, a timer or a child instance).
export const TESTABLE = ["python", "http", "llm", "router"];
const EMPTY_SAMPLE = { context: {}, input: {}, steps: {} };

const pretty = (value) => JSON.stringify(value, null, 2);

/** The section for node `id` of kind `type`, or null when it cannot be tested (or by this user). */
export function testSection(id, type, data) {
  if (!CFG.canSave || !TESTABLE.includes(type) || !CFG.urls.testNode) return null;
  const pinned = data.sample || {};
  const { pinned_response: pinnedResponse, ...sample } = pinned;
  const sampleBox = el("textarea", { id: "node-test-sample", class: "code", rows: 5, spellcheck: "false",
    "aria-label": "Sample (context, input, steps) as JSON" });
  sampleBox.value = pretty(Object.keys(sample).length ? sample : EMPTY_SAMPLE);
  let responseBox = null;
  if (type === "llm") {
    responseBox = el("textarea", { id: "node-test-response", class: "code", rows: 2, spellcheck: "false",
      placeholder: '{"text": "…"} (empty: call the real provider)', "aria-label": "Pinned response as JSON" });
    responseBox.value = pinnedResponse ? pretty(pinnedResponse) : "";
  }
  const result = el("div", { id: "node-test-result", "aria-live": "polite" });

  function read() {
    const out = {};
    try {
      out.sample = JSON.parse(sampleBox.value || "{}");
    } catch (exc) {
      throw new Error(`the sample is not JSON: ${exc.message}`);
    }
    if (responseBox && responseBox.value.trim()) {
      try {
        out.pinned_response = JSON.parse(responseBox.value);
      } catch (exc) {
        throw new Error(`the pinned response is not JSON: ${exc.message}`);
      }
    }
    return out;
  }

  async function run() {
    replaceChildren(result, el("p", { class: "muted" }, "Running…"));
    try {
      const body = { graph: toGraph(), ...read() };
      showAnswer(result, await request("POST", CFG.urls.testNode.replace("__node__", encodeURIComponent(id)), body));
    } catch (err) {
      replaceChildren(result, el("p", { class: "node-test-error", role: "alert" }, err.message));
    }
  }

  function pin() {
    try {
      const { sample: value, pinned_response: response } = read();
      setNodeField(id, "sample", response ? { ...value, pinned_response: response } : value);
      commit();
      replaceChildren(result, el("p", { class: "muted" }, "Sample pinned to the node: saved with the next version."));
    } catch (err) {
      replaceChildren(result, el("p", { class: "node-test-error", role: "alert" }, err.message));
    }
  }

  return section("Test node",
    el("label", { for: "node-test-sample" }, "Sample: context, input and steps (JSON)"), sampleBox,
    responseBox ? el("label", { for: "node-test-response" }, "Pinned response (JSON)") : null, responseBox,
    el("div", { class: "panel-actions" },
      el("button", { type: "button", id: "node-test-run", onclick: run }, "Run test"),
      state.readOnly ? null : el("button", { type: "button", id: "node-test-pin", onclick: pin }, "Pin sample")),
    result);
}

/** The server's answer: the error (if any), then rendered config, output, context updates, routing. */
export function showAnswer(box, answer) {
  const block = (title, value, id) => [el("h4", {}, title), el("pre", { class: "code node-test-json", id }, pretty(value))];
  const routing = (answer.routing || []).map((edge) => el("li", { class: edge.fires ? "fires" : "idle" },
    `${edge.fires ? "✓" : "✗"} → ${edge.target}`, edge.when ? el("code", {}, ` when ${edge.when}`) : " (always)",
    edge.error ? el("span", { class: "node-test-error" }, ` ${edge.error}`) : null));
  replaceChildren(box,
    answer.error ? el("p", { class: "node-test-error", role: "alert", id: "node-test-failure" },
      `${answer.error.code}: ${answer.error.message}`) : el("p", { class: "muted" }, `Ran in ${answer.duration_ms} ms.`),
    answer.error ? null : [el("h4", {}, "Routing"), routing.length
      ? el("ul", { class: "connections", id: "node-test-routing" }, routing)
      : el("p", { class: "muted" }, "No outgoing edges.")],
    block("Output", answer.output, "node-test-output"),
    answer.context_updates && Object.keys(answer.context_updates).length
      ? block("Context updates", answer.context_updates, "node-test-context") : null,
    block("Rendered config", answer.config, "node-test-config"));
}
