/* The wiring of every toolbar button and dialog, and the keyboard shortcuts. The top of the editor's
 * chain below main.js: it imports the modules whose actions the buttons and keys run. */

import * as G from "../lib/graph.js";
import { readingOrder, stepFrom } from "../lib/node-order.js";
import { state, view, isDirty } from "./context.js";
import { commit, deleteSelection, isReal, redo, runLayout, selection, undo, zoomBy } from "./canvas.js";
import { setConnectMode } from "./handle.js";
import { validate } from "./validation.js";
import { doSave, openSave, openVersions, runDiff } from "./versions.js";
import { doImport, exportJson, openImport } from "./io.js";
import { bindRunDialog, openRun } from "./run.js";

const $ = (sel) => document.querySelector(sel);

function onKey(e) {
  // While a plan is previewed only its Accept and Discard act (static/js/editor/planner.js).
  if (document.body.classList.contains("plan-previewing")) return;
  const cy = view.cy;
  const tag = (e.target.tagName || "").toLowerCase();
  const typing = tag === "input" || tag === "textarea" || tag === "select" || e.target.isContentEditable;
  const mod = e.ctrlKey || e.metaKey;
  const key = e.key.toLowerCase();
  if (mod && key === "s") {
    e.preventDefault();
    if (typing) e.target.dispatchEvent(new Event("change", { bubbles: true }));
    openSave();
    return;
  }
  if (typing || document.querySelector("dialog[open]")) return;
  if (mod && key === "z" && !e.shiftKey) { e.preventDefault(); undo(); return; }
  if ((mod && key === "z" && e.shiftKey) || (mod && key === "y")) { e.preventDefault(); redo(); return; }
  if (mod && key === "a") { e.preventDefault(); cy.elements().filter(isReal).select(); return; }
  if (mod || e.altKey) return;
  if (e.key === "Delete" || e.key === "Backspace") { e.preventDefault(); deleteSelection(); return; }
  if (e.key === "Escape") { setConnectMode(false); cy.$(":selected").unselect(); return; }
  if (key === "c") { setConnectMode(!state.connectMode); return; }
  // Keyboard selection: N / Shift+N walk the nodes in reading order; Enter edits the selected one.
  if (key === "n") { e.preventDefault(); selectNextNode(e.shiftKey ? -1 : 1); return; }
  if (e.key === "Enter" && e.target.id === "cy" && selection().length === 1) {
    e.preventDefault();
    const first = document.querySelector("#panel input:not([disabled]), #panel select, #panel textarea, #panel button");
    if (first) first.focus();
    return;
  }
  if (key === "f") { G.fit(cy); return; }
  if (e.key === "+" || e.key === "=") { zoomBy(1.2); return; }
  if (e.key === "-") { zoomBy(1 / 1.2); return; }
  const arrows = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
  if (arrows[e.key] && !state.readOnly) {
    const nodes = cy.$("node:selected").filter(isReal);
    if (nodes.empty()) return;
    e.preventDefault();
    const step = e.shiftKey ? 50 : 10;
    nodes.shift({ x: arrows[e.key][0] * step, y: arrows[e.key][1] * step });
    commit();
  }
}

/** Select the node `step` places after the selected one (reading order), and bring it into view. */
export function selectNextNode(step) {
  const cy = view.cy;
  const nodes = cy.nodes().filter(isReal);
  const current = cy.$("node:selected").filter(isReal);
  const id = stepFrom(readingOrder(nodes.map((n) => ({ id: n.id(), x: n.position("x"), y: n.position("y") }))),
    current.length === 1 ? current.id() : null, step);
  if (id === null) return;
  cy.$(":selected").unselect();
  const node = cy.getElementById(id);
  node.select();
  const ext = cy.extent();
  const p = node.position();
  if (p.x < ext.x1 || p.x > ext.x2 || p.y < ext.y1 || p.y > ext.y2) cy.animate({ center: { eles: node }, duration: 150 });
  const status = $("#cy-status");
  if (status) status.textContent = `Selected node ${id} (${node.data("type")}). Enter edits it.`;
}

export function bindToolbar() {
  const on = (id, fn) => $(id).addEventListener("click", fn);
  on("#btn-undo", undo);
  on("#btn-redo", redo);
  on("#btn-delete", deleteSelection);
  on("#btn-connect", () => setConnectMode(!state.connectMode));
  on("#btn-layout-lr", () => runLayout("LR"));
  on("#btn-layout-tb", () => runLayout("TB"));
  on("#btn-fit", () => G.fit(view.cy));
  on("#btn-zoom-in", () => zoomBy(1.2));
  on("#btn-zoom-out", () => zoomBy(1 / 1.2));
  on("#btn-validate", () => validate());
  on("#btn-save", openSave);
  on("#btn-versions", openVersions);
  on("#btn-export", exportJson);
  on("#btn-import", openImport);
  on("#btn-run", openRun);
  on("#problems-close", () => { $("#problems").hidden = true; state.issuesShown = false; });

  $("#save-form").addEventListener("submit", (e) => { e.preventDefault(); doSave(false); });
  on("#save-force", () => doSave(true));
  on("#save-cancel", () => $("#save-dialog").close());
  bindRunDialog();
  on("#versions-close", () => $("#versions-dialog").close());
  on("#diff-run", runDiff);
  $("#import-form").addEventListener("submit", (e) => { e.preventDefault(); doImport(); });
  on("#import-cancel", () => $("#import-dialog").close());
  $("#import-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) $("#import-text").value = await file.text();
  });
  document.addEventListener("keydown", onKey);
  window.addEventListener("beforeunload", (e) => {
    if (isDirty()) {
      e.preventDefault();
      e.returnValue = "";
    }
  });
}
