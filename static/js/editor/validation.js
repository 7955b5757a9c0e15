/* Server validation: run the server's validator on the canvas, mark the nodes and edges each problem
 * names, and list the problems (a click on one shows it). */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { debounce } from "../lib/format.js";
import { toast } from "../lib/toast.js";
import { CFG, events, state, view } from "./context.js";
import { issueTargets } from "./model.js";
import { clearIssueMarks, edgeList, realNodes, toGraph } from "./canvas.js";

/** Run the server's validator on the canvas; mark and list what it finds. Returns true when valid. */
export async function validate(options) {
  const opts = options || {};
  const edges = edgeList();
  let data;
  try {
    data = await request("POST", CFG.urls.validate, { graph: toGraph() });
  } catch (err) {
    toast("Validation failed: " + err.message, "error");
    return false;
  }
  showIssues(data.errors || [], edges);
  if (!opts.quiet) {
    if (data.valid) toast("✓ The graph is valid", "ok");
    else toast(`${data.errors.length} problem${data.errors.length === 1 ? "" : "s"} found`, "error");
  }
  // A save is refused for the graph's own problems only: what this deployment cannot run yet (no LLM
  // provider configured) is listed, but a provider may come before the first run.
  if (opts.forSave) return data.errors.every((e) => e.kind === "deployment");
  return data.valid;
}

export const revalidateSoon = debounce(() => validate({ quiet: true }), 400);

/** Show server issues; `edges` is the canvas's edge list when the graph was sent (edge indexes refer to it). */
export function showIssues(errors, edges) {
  const cy = view.cy;
  clearIssueMarks();
  const nodeIds = new Set(realNodes().map((n) => n.id()));
  state.issues = errors.map((issue) => Object.assign({}, issue, { ids: issueTargets(issue, nodeIds, edges || edgeList()) }));
  state.issues.forEach((i) => i.ids.forEach((id) => cy.getElementById(id).addClass("has-error")));
  replaceChildren(document.getElementById("problems-list"), state.issues.map((issue) =>
    el("li", { class: issue.ids.length ? "clickable" : "", onclick: () => focusIssue(issue) }, issue.message)));
  const box = document.getElementById("problems");
  box.classList.toggle("ok", errors.length === 0);
  document.getElementById("problems-title").textContent = errors.length ? `Problems (${errors.length})` : "✓ No problems";
  box.hidden = false;
  state.issuesShown = errors.length > 0;
  if (!errors.length) setTimeout(() => { if (!state.issuesShown) box.hidden = true; }, 2500);
  events.emit("panel:issues");
}

function focusIssue(issue) {
  if (!issue.ids.length) return;
  const cy = view.cy;
  const eles = cy.collection(issue.ids.map((id) => cy.getElementById(id)));
  cy.$(":selected").unselect();
  eles.first().select();
  cy.animate({ center: { eles }, duration: 200 });
}
