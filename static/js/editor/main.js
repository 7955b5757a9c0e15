/* The Steadyflow workflow editor: draw a graph, edit its nodes and edges in the side panel, validate
 * with the server's validator, save immutable versions, compare and restore them, import/export JSON,
 * and start a run.
 *
 * The modules are a one-way chain (tests/js/editor_imports.test.mjs fails on a cycle), each importing
 * only the ones below it:
 *   lib/ (dom, api, format, bus, toast, graph, ...)            shared by every page
 *   model.js, state.js, input-schema.js, run-input.js, ...     pure, unit-tested with node --test
 *   context.js                                                 the one state, the canvas, the event bus
 *   canvas.js                                                  cytoscape adapter and edits
 *   handle.js, toolbar.js, forms.js, validation.js             edge drawing, button states, fields
 *   functions.js, mcp-picker.js, input-panel.js, node-test.js  panel sections
 *   panel.js                                                   the side panel
 *   palette.js, io.js, versions.js, run.js, planner.js         actions
 *   bindings.js                                                buttons, dialogs and keys
 *   main.js                                                    loading and wiring (this file)
 * A lower module never calls one above it: it emits an event on context.js's bus (state.js EVENTS),
 * and the listeners are wired here.
 */

import * as G from "../lib/graph.js";
import { request } from "../lib/api.js";
import { debounce } from "../lib/format.js";
import { toast } from "../lib/toast.js";
import { CFG, events, state, view, isDirty } from "./context.js";
import { History, clone, paletteOrder } from "./model.js";
import { commit, isReal, newEdgeId, setGraphFields, snapshot, toGraph } from "./canvas.js";
import { setupHandle } from "./handle.js";
import { buildPalette } from "./palette.js";
import { afterChange, refreshPanelIssues, renderPanel } from "./panel.js";
import { showBanner } from "./toolbar.js";
import { restoreVersion } from "./versions.js";
import { bindPlanner } from "./planner.js";
import { openRun } from "./run.js";
import { bindToolbar } from "./bindings.js";

/** Who reacts to what the lower modules report (state.js EVENTS). */
function wireEvents() {
  events.on("graph:changed", ({ fromHistory }) => afterChange(fromHistory));
  events.on("panel:render", () => renderPanel());
  events.on("panel:issues", () => refreshPanelIssues());
  events.on("version:restore", ({ number, button }) => restoreVersion(number, button));
}

function starterGraph() {
  return { nodes: [{ id: "start", type: "start", position: { x: 0, y: 0 } },
    { id: "end", type: "end", position: { x: 420, y: 0 } }], edges: [] };
}

async function init() {
  wireEvents();
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
  // Open at a readable size (lib/graph.js fitReadable); a graph without positions in the editor's layout.
  if (G.hasPositions(graph)) G.fitReadable(cy); else G.layout(cy, "LR");
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
