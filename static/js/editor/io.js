/* Import and export of the graph JSON, and the Run dialog (start an instance of the latest version). */

import { el } from "../lib/dom.js";
import { request } from "../lib/api.js";
import * as G from "../lib/graph.js";
import { CFG, state, view, isDirty } from "./context.js";
import { parseImport, parseStartInput } from "./model.js";
import { commit, showGraph, toGraph } from "./canvas.js";
import { renderPanel } from "./panel.js";
import { validate } from "./validation.js";
import { toast } from "./toolbar.js";

const $ = (sel) => document.querySelector(sel);

export function exportJson() {
  const doc = Object.assign({ slug: CFG.slug, name: state.name, description: state.description }, toGraph());
  const blob = new Blob([JSON.stringify(doc, null, 2) + "\n"], { type: "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob),
    download: `${CFG.slug}${state.version ? "-v" + state.version : ""}${isDirty() ? "-draft" : ""}.json` });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

export function openImport() {
  $("#import-error").hidden = true;
  $("#import-text").value = "";
  $("#import-file").value = "";
  $("#import-dialog").showModal();
}

export function doImport() {
  const parsed = parseImport($("#import-text").value);
  const err = $("#import-error");
  if (parsed.error) {
    err.textContent = parsed.error;
    err.hidden = false;
    return;
  }
  showGraph(parsed.graph, false);
  if (!G.hasPositions(parsed.graph)) G.layout(view.cy, "LR");
  else G.fit(view.cy);
  commit();
  renderPanel();
  $("#import-dialog").close();
  toast(`Imported ${parsed.graph.nodes.length} nodes and ${parsed.graph.edges.length} edges`, "ok");
  validate({ quiet: true });
}

export function checkRunInput() {
  const { error } = parseStartInput($("#run-input").value);
  const err = $("#run-error");
  err.textContent = error || "";
  err.hidden = !error;
  $("#run-confirm").disabled = Boolean(error);
  return !error;
}

export function openRun() {
  if (!CFG.canRun || state.latest === null) return;
  $("#run-version").textContent = `${state.name} v${state.latest}`;
  $("#run-dirty").hidden = !isDirty();
  checkRunInput();
  $("#run-dialog").showModal();
  $("#run-input").focus();
}

export async function doRun() {
  if (!checkRunInput()) return;
  $("#run-confirm").disabled = true;
  try {
    const data = await request("POST", CFG.urls.start, { input: parseStartInput($("#run-input").value).value });
    state.history.markSaved(); // a run is not an edit: leave without asking
    location.href = CFG.urls.instance.replace("{id}", data.id);
  } catch (exc) {
    const err = $("#run-error");
    err.textContent = exc.message || `starting failed (${exc.status})`;
    err.hidden = false;
  } finally {
    $("#run-confirm").disabled = false;
  }
}
