/* The Steadyflow workflow editor: draw a graph, edit its nodes and edges in the side panel, validate
 * with the server's validator, save immutable versions, compare and restore them, import/export JSON,
 * and start a run.
 *
 * Modules: context.js (the editor's state), model.js (the graph model and history, pure),
 * canvas.js (cytoscape adapter and edits), handle.js (drawing edges), palette.js, forms.js (fields
 * from JSON Schema), panel.js (the side panel), validation.js, versions.js (save, versions, diff,
 * restore), io.js (import, export, run), toolbar.js (buttons, banner, keyboard), planner.js ("Plan with
 * AI": an LLM's proposal previewed as a diff, then accepted or discarded).
 */

import * as G from "../lib/graph.js";
import { request } from "../lib/api.js";
import { debounce } from "../lib/format.js";
import { CFG, state, view, isDirty } from "./context.js";
import { History, clone, paletteOrder } from "./model.js";
import { commit, isReal, newEdgeId, setGraphFields, snapshot, toGraph } from "./canvas.js";
import { setupHandle } from "./handle.js";
import { buildPalette } from "./palette.js";
import { renderPanel } from "./panel.js";
import { bindToolbar, showBanner, toast } from "./toolbar.js";
import { bindPlanner } from "./planner.js";
import { openRun } from "./run.js";

function starterGraph() {
  return { nodes: [{ id: "start", type: "start", position: { x: 0, y: 0 } },
    { id: "end", type: "end", position: { x: 420, y: 0 } }], edges: [] };
}

async function init() {
  const panel = document.getElementById("panel");
  let types;
  try {
    types = (await request("GET", CFG.urls.nodeTypes)).node_types;
  } catch (err) {
    panel.textContent = "Could not load the node types: " + err.message;
    return;
  }
  types.forEach((t) => { state.types[t.name] = t; });
  state.typeOrder = paletteOrder(types.map((t) => t.name));

  let graph = starterGraph();
  if (state.version !== null) {
    try {
      graph = (await request("GET", `${CFG.urls.version}${state.version}`)).graph;
    } catch (err) {
      panel.textContent = "Could not load the version: " + err.message;
      return;
    }
  }
  setGraphFields(clone(graph));
  const cy = G.create(document.getElementById("cy"), graph, state.types, {
    layout: "LR",
    cytoscape: { boxSelectionEnabled: true, selectionType: "single", autoungrabify: state.readOnly },
  });
  view.cy = cy;
  if (!state.readOnly) {
    view.eh = cy.edgehandles({
      canConnect: (source, target) => !source.same(target) && isReal(target),
      edgeParams: (source, target) => ({ data: G.edgeData({ source: source.id(), target: target.id() }, newEdgeId()) }),
      hoverDelay: 150, snap: true, snapThreshold: 30, snapFrequency: 15, noEdgeEventsInDraw: true,
      disableBrowserGestures: true,
    });
    cy.on("ehcomplete", (event, source, target, added) => {
      cy.$(":selected").unselect();
      added.select();
      commit();
      renderPanel();
    });
    setupHandle();
    cy.on("dragfree", "node", () => commit());
  }
  cy.on("select unselect", debounce(renderPanel, 0));
  // Edges that would cross a node bend around it, as nodes move and elements come and go.
  cy.on("dragfree add remove", debounce(() => G.routeEdges(cy), 0));
  state.history = new History(snapshot());
  bindToolbar();
  if (!state.readOnly) bindPlanner();
  buildPalette();
  showBanner();
  document.body.classList.toggle("editor-readonly", state.readOnly);
  renderPanel();
  if (location.hash.startsWith("#restored-")) {
    toast(`Restored as v${location.hash.slice("#restored-".length)}`, "ok");
    history.replaceState(null, "", location.pathname + location.search);
  }
  // The workflow list's Run button: open the Run dialog at once (?run=1), then drop the flag.
  if (new URLSearchParams(location.search).get("run") === "1") {
    history.replaceState(null, "", location.pathname + location.hash);
    if (CFG.canRun && state.latest !== null) await openRun();
  }
  document.getElementById("editor").dataset.ready = "true";
}

// Read-only hooks for tests and the browser console; editing goes through the UI.
window.SteadyflowEditor = {
  cy: () => view.cy,
  graph: () => toGraph(),
  isDirty: () => isDirty(),
  state: () => ({ version: state.version, latest: state.latest, readOnly: state.readOnly,
    undo: state.history ? state.history.index : -1, issues: state.issues.map((i) => i.message) }),
};

init();
