/* Import and export of the graph JSON. */

import { el } from "../lib/dom.js";
import * as G from "../lib/graph.js";
import { CFG, state, view, isDirty } from "./context.js";
import { parseImport } from "./model.js";
import { commit, showGraph, toGraph } from "./canvas.js";
import { renderPanel } from "./panel.js";
import { toast } from "../lib/toast.js";
import { validate } from "./validation.js";

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
  else G.fitReadable(view.cy);
  commit();
  renderPanel();
  $("#import-dialog").close();
  toast(`Imported ${parsed.graph.nodes.length} nodes and ${parsed.graph.edges.length} edges`, "ok");
  validate({ quiet: true });
}
