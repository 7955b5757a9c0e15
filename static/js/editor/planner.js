/* "Plan with AI": the designer states an objective, the server asks an LLM for a graph and validates it
 * (POST .../plan), and the proposal is previewed on the canvas as a diff against the current graph.
 * Accept keeps it as unsaved changes (one undo step; it becomes a version only when saved); Discard puts
 * the canvas back as it was. A refused proposal shows the server's problems, each naming its node. */

import { el, replaceChildren } from "../lib/dom.js";
import * as G from "../lib/graph.js";
import { request } from "../lib/api.js";
import { CFG, state, view } from "./context.js";
import { diffRows } from "./model.js";
import { commit, showGraph, toGraph } from "./canvas.js";
import { renderPanel } from "./panel.js";
import { toast } from "../lib/toast.js";
import { validate } from "./validation.js";

const $ = (sel) => document.querySelector(sel);
const MARKS = "diff-added diff-changed diff-moved";
let before = null; // the graph on the canvas while a proposal is previewed

/** A scripted reply that validates: start -> an llm node drafting what the objective asks -> end. */
export function sampleReply(objective) {
  return { nodes: [{ id: "start", type: "start" },
    { id: "draft", type: "llm", config: { provider: "scripted", prompt: objective || "Draft a reply to {{ input }}",
      script: [{ text: "A scripted draft: replace this reply, or configure a provider." }] } },
    { id: "end", type: "end" }],
  edges: [{ source: "start", target: "draft" }, { source: "draft", target: "end" }] };
}

export function openPlan() {
  if (state.readOnly || before !== null) return;
  // Without a configured provider, say so and open the provider options: the scripted planner works offline.
  if (!CFG.llmConfigured) {
    $("#plan-no-provider").hidden = false;
    $("#plan-provider").open = true;
  }
  $("#plan-error").hidden = true;
  replaceChildren($("#plan-problems")).hidden = true;
  $("#plan-dialog").showModal();
  $("#plan-objective").focus();
}

export async function doPlan() {
  const objective = $("#plan-objective").value.trim();
  const err = $("#plan-error");
  if (!objective) {
    err.textContent = "Say what the workflow should do.";
    err.hidden = false;
    return;
  }
  const body = { objective, current: toGraph() };
  const credential = $("#plan-credential").value.trim();
  const model = $("#plan-model").value.trim();
  const scripted = $("#plan-script").value.trim();
  if (credential) body.credential = credential;
  if (model) body.model = model;
  // The scripted provider (offline demos, tests): the pasted text is the model's reply.
  if (scripted) Object.assign(body, { provider: "scripted", script: [{ text: scripted }] });
  const button = $("#plan-confirm");
  button.disabled = true;
  button.textContent = "Planning…";
  try {
    const data = await request("POST", CFG.urls.plan, body);
    $("#plan-dialog").close();
    preview(data);
  } catch (exc) {
    err.textContent = exc.message || `planning failed (${exc.status})`;
    err.hidden = false;
    const problems = (exc.data && exc.data.errors) || [];
    replaceChildren($("#plan-problems"), problems.map((p) => el("li", { "data-node": p.node || "" },
      p.node ? el("strong", {}, p.node + ": ") : null, p.message))).hidden = !problems.length;
  } finally {
    button.disabled = false;
    button.textContent = "Propose";
  }
}

/** Show the proposal on the canvas, marked against what was there, with Accept and Discard. */
function preview(data) {
  before = toGraph();
  showGraph(data.graph, false);
  if (!G.hasPositions(data.graph)) G.layout(view.cy, "LR");
  else G.fitReadable(view.cy);
  const cy = view.cy;
  const d = data.diff;
  if (d) {
    d.nodes.added.forEach((id) => cy.getElementById(id).addClass("diff-added"));
    d.nodes.changed.forEach((c) => cy.getElementById(c.id).addClass("diff-changed"));
    const mark = (list, cls) => list.forEach((e) => cy.edges().filter((x) => x.data("source") === e.source
      && x.data("target") === e.target && (x.data("when") || null) === (e.when || null)).addClass(cls));
    mark(d.edges.added, "diff-added");
    mark(d.edges.changed, "diff-changed");
  }
  // Positions are the layout's, not the designer's: a "moved" row would only be noise.
  const rows = d ? diffRows(d).filter(([kind]) => kind !== "moved") : [];
  const usage = data.usage || {};
  replaceChildren($("#plan-diff"), rows.map(([kind, what, text]) =>
    el("li", { class: "diff-" + kind }, el("span", { class: "diff-kind" }, `${kind} ${what}`), " ", text)));
  $("#plan-summary").textContent = `Proposed: ${data.graph.nodes.length} nodes, ${data.graph.edges.length} edges`
    + ` (${usage.model || "model"}: ${(usage.prompt_tokens || 0) + (usage.completion_tokens || 0)} tokens,`
    + ` $${Number(usage.cost_usd || 0).toFixed(4)}). Green: added, amber: changed.`
    + ((data.kept || []).includes("input") ? " The workflow's declared start input is kept." : "");
  $("#plan-preview").hidden = false;
  document.body.classList.add("plan-previewing");
  // Nothing on the canvas is edited while previewing: an edit would commit the proposal half-accepted.
  view.cy.autoungrabify(true);
  if (view.eh) view.eh.disable();
  renderPanel();
}

function endPreview() {
  view.cy.elements().removeClass(MARKS);
  $("#plan-preview").hidden = true;
  document.body.classList.remove("plan-previewing");
  view.cy.autoungrabify(state.readOnly);
  if (view.eh) view.eh.enable();
  before = null;
}

export function acceptPlan() {
  if (before === null) return;
  endPreview();
  commit(); // one history step: undo brings the old graph back; unsaved until the designer saves
  renderPanel();
  validate({ quiet: true });
  toast("Proposal accepted: save it to make it a version", "ok");
}

export function discardPlan() {
  if (before === null) return;
  const graph = before;
  endPreview();
  showGraph(graph, false);
  G.fitReadable(view.cy);
  renderPanel();
  toast("Proposal discarded", "ok");
}

export const isPreviewing = () => before !== null;

export function bindPlanner() {
  const on = (id, fn) => $(id).addEventListener("click", fn);
  on("#btn-plan", openPlan);
  $("#plan-form").addEventListener("submit", (e) => { e.preventDefault(); doPlan(); });
  on("#plan-cancel", () => $("#plan-dialog").close());
  on("#plan-sample", () => {
    $("#plan-script").value = JSON.stringify(sampleReply($("#plan-objective").value.trim()), null, 2);
  });
  on("#plan-accept", acceptPlan);
  on("#plan-discard", discardPlan);
}
