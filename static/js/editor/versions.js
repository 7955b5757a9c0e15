/* Saving (a new immutable version with a message; refused with a choice to save anyway when someone
 * saved in between), the versions dialog, comparing two versions, restoring one as a new version. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { CFG, state, view, isDirty } from "./context.js";
import * as G from "../lib/graph.js";
import { History, diffRows } from "./model.js";
import { conflictView } from "./conflict.js";
import { stamp } from "../lib/format.js";
import { toast } from "../lib/toast.js";
import { edgeList, realEdges, showGraph, snapshot, toGraph } from "./canvas.js";
import { renderPanel } from "./panel.js";
import { showIssues, validate } from "./validation.js";
import { showBanner, updateToolbar } from "./toolbar.js";

const $ = (sel) => document.querySelector(sel);

export async function openSave() {
  if (state.readOnly) return;
  if (state.parseErrors.size) {
    toast("Fix the fields marked in red first (they do not parse).", "error");
    return;
  }
  if (!state.name.trim()) {
    toast("The workflow needs a name.", "error");
    return;
  }
  const valid = await validate({ quiet: true, forSave: true });
  if (!valid) {
    toast("The graph has problems: fix them before saving (see the list).", "error");
    return;
  }
  $("#save-summary").textContent = state.latest === null ? `This will be v1 of ${state.name}.`
    : `This will be v${state.latest + 1} of ${state.name} (you started from v${state.version}).`;
  $("#save-error").hidden = true;
  $("#save-force").hidden = true;
  replaceChildren($("#save-conflict")).hidden = true;
  $("#save-message").value = "";
  $("#save-dialog").showModal();
  $("#save-message").focus();
}

export async function doSave(force) {
  const message = $("#save-message").value.trim();
  const err = $("#save-error");
  if (!message) {
    err.textContent = "Say what changed: the message is kept with the version.";
    err.hidden = false;
    return;
  }
  $("#save-confirm").disabled = true;
  const snap = snapshot();
  const edges = edgeList();
  const body = { graph: toGraph(), message, name: state.name.trim(), description: state.description,
    base_version: state.version };
  if (force) body.force = true;
  try {
    const data = await request("POST", CFG.urls.versions, body);
    state.version = state.latest = data.version.number;
    state.history.markSaved(snap);
    $("#save-dialog").close();
    if (new URL(location.href).searchParams.has("version")) history.replaceState(null, "", CFG.urls.editor);
    updateToolbar();
    toast(`Saved v${state.version}`, "ok");
  } catch (exc) {
    if (exc.status === 400 && exc.data && exc.data.errors) showIssues(exc.data.errors, edges);
    err.textContent = exc.message || `saving failed (${exc.status})`;
    err.hidden = false;
    $("#save-force").hidden = exc.status !== 409;
    if (exc.status === 409 && exc.data && "latest" in exc.data) showConflict(exc.data);
  } finally {
    $("#save-confirm").disabled = false;
  }
}

const diffList = (rows, id) => el("ul", { class: "diff-list", id }, rows.map(([kind, what, text]) =>
  el("li", { class: "diff-" + kind }, el("span", { class: "diff-kind" }, `${kind} ${what}`), " ", text)));

/** What "Save anyway" would overwrite, shown before the designer chooses it: who saved, when, their
 * message, what they changed since this editor's version, and how the saved version would differ. */
function showConflict(data) {
  const view = conflictView(data, state.version);
  const box = replaceChildren($("#save-conflict"));
  box.append(el("p", { class: "conflict-head", id: "conflict-head" }, view.headline,
    view.message ? el("span", {}, " Their message: ", el("q", {}, view.message)) : null));
  box.append(el("h3", {}, "Their changes"));
  if (!view.theirsKnown) box.append(el("p", { class: "muted" }, "Not known (the version you started from is gone)."));
  else if (!view.theirs.length) box.append(el("p", { class: "muted", id: "conflict-theirs" }, "No change to nodes, edges or settings (only positions or the message)."));
  else box.append(diffList(view.theirs, "conflict-theirs"));
  box.append(el("h3", {}, "Saving anyway makes their version into yours"));
  box.append(view.yours.length ? diffList(view.yours, "conflict-yours")
    : el("p", { class: "muted", id: "conflict-yours" }, "No difference in nodes, edges or settings."));
  box.append(el("p", { class: "muted" }, "Cancel and open the latest version to keep their work, or save anyway to replace it."));
  box.hidden = false;
}

export async function openVersions() {
  let versions;
  try {
    versions = (await request("GET", CFG.urls.versions)).versions;
  } catch (err) {
    toast(err.message, "error");
    return;
  }
  replaceChildren($("#versions-body"), versions.map((v) => {
    const current = v.number === state.version;
    return el("tr", { class: current ? "current" : "", "data-version": v.number },
      el("td", {}, el("strong", {}, "v" + v.number), current ? el("span", { class: "badge" }, "open") : null),
      el("td", {}, v.message || "—"),
      el("td", {}, v.created_by || "—"),
      el("td", {}, stamp(v.created_at)),
      el("td", {}, String(v.instances)),
      el("td", { class: "actions" },
        current ? null : el("a", { href: `${CFG.urls.editor}?version=${v.number}`, class: "button" }, "Open"),
        CFG.canSave && v.number !== state.latest ? el("button", { type: "button", class: "restore",
          onclick: (e) => restoreVersion(v.number, e.currentTarget) }, "Restore") : null));
  }));
  const options = () => versions.map((v) => el("option", { value: v.number }, "v" + v.number));
  const from = replaceChildren($("#diff-from"), options());
  const to = replaceChildren($("#diff-to"), options());
  if (versions.length > 1) {
    from.value = String(state.version && state.version > 1 ? state.version - 1 : versions[1].number);
    to.value = String(state.version || versions[0].number);
  }
  $("#diff-result").hidden = true;
  $("#versions-dialog").showModal();
}

export async function restoreVersion(number, button) {
  if (isDirty() && !confirm("Restoring discards your unsaved changes. Continue?")) return;
  if (button) button.disabled = true; // one click, one version
  let data;
  let graph;
  try {
    data = await request("POST", `${CFG.urls.version}${number}/restore`, {});
    graph = (await request("GET", `${CFG.urls.version}${data.version.number}`)).graph;
  } catch (err) {
    if (button) button.disabled = false;
    toast(err.message, "error");
    return;
  }
  const restored = data.version.number;
  const said = data.unchanged ? `v${restored} already holds v${number}'s graph: nothing new to save`
    : `Restored v${number} as v${restored}`;
  if (state.readOnly) {
    // An old version is open read-only: open the latest (now the restored graph) for editing.
    state.history.markSaved(); // leave without the unsaved-changes prompt
    location.href = CFG.urls.editor + "#restored-" + restored;
    return;
  }
  // The editor already edits the latest: show the restored graph in place, as saved.
  showGraph(graph, false);
  G.fitReadable(view.cy);
  state.version = state.latest = restored;
  state.history = new History(snapshot());
  $("#versions-dialog").close();
  renderPanel();
  showBanner();
  updateToolbar();
  toast(said, "ok");
}

export async function runDiff() {
  const from = $("#diff-from").value;
  const to = $("#diff-to").value;
  const box = replaceChildren($("#diff-result"));
  let d;
  try {
    d = await request("GET", `${CFG.urls.diff}?from=${from}&to=${to}`);
  } catch (err) {
    box.hidden = false;
    box.append(el("p", { class: "error" }, err.message));
    return;
  }
  box.hidden = false;
  const rows = diffRows(d);
  box.append(el("h3", {}, `v${d.from} → v${d.to}`));
  if (!rows.length) box.append(el("p", { class: "muted" }, d.identical ? "The two versions are identical."
    : "No differences in nodes, edges or settings."));
  else {
    box.append(diffList(rows));
  }
  // Show the change on the canvas when it displays the newer side.
  const cy = view.cy;
  cy.elements().removeClass("diff-added diff-changed diff-moved");
  if (Number(to) === state.version && !isDirty()) {
    d.nodes.added.forEach((id) => cy.getElementById(id).addClass("diff-added"));
    d.nodes.changed.forEach((c) => cy.getElementById(c.id).addClass("diff-changed"));
    d.nodes.moved.forEach((id) => cy.getElementById(id).addClass("diff-moved"));
    const mark = (list, cls) => list.forEach((e) => realEdges().filter((x) => x.data("source") === e.source
      && x.data("target") === e.target && (x.data("when") || null) === (e.when || null)).addClass(cls));
    mark(d.edges.added, "diff-added");
    mark(d.edges.changed, "diff-changed");
    box.append(el("p", { class: "muted" }, "Highlighted on the canvas: green added, amber changed, blue moved."));
  }
}
