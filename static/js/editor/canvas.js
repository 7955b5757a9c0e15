/* The cytoscape adapter: the canvas holds the graph. Each node's data carries its id, type and the rest
 * of its JSON (`node`), each edge its source, target, `when` and the rest (`edge`). toGraph() turns
 * the canvas back into the graph JSON, positions included. Every edit ends in commit(), which records
 * a snapshot in the history; undo and redo rebuild the canvas from a snapshot. What reacts to an edit
 * (toolbar, side panel, revalidation) sits above: this module emits `graph:changed` and `panel:render`
 * (context.js `events`), it imports none of them. */

import * as G from "../lib/graph.js";
import * as A from "../lib/arrange.js";
import { events, state, view, isDirty } from "./context.js";
import { clone, setPath, uniqueNodeId, renameProblem, renameNode as renamed } from "./model.js";

export const isReal = (ele) => !ele.hasClass("eh-ghost") && !ele.hasClass("eh-ghost-node")
  && !ele.hasClass("eh-ghost-edge") && !ele.hasClass("eh-preview");
export const realNodes = () => view.cy.nodes().filter(isReal);
export const realEdges = () => view.cy.edges().filter(isReal);
export const selection = () => view.cy.$(":selected").filter(isReal);

/** The graph JSON on the canvas, positions included (rounded: a layout reopens exactly as saved). */
export function toGraph() {
  const nodes = realNodes().map((n) => {
    const d = n.data();
    const p = n.position();
    return Object.assign({ id: d.id, type: d.type }, clone(d.node) || {},
      { position: { x: Math.round(p.x), y: Math.round(p.y) } });
  });
  const edges = realEdges().map((e) => {
    const d = e.data();
    const out = { source: d.source, target: d.target };
    if (d.when) out.when = d.when;
    return Object.assign(out, clone(d.edge) || {});
  });
  const graph = { nodes, edges };
  if (Object.keys(state.settings).length) graph.settings = clone(state.settings);
  Object.assign(graph, clone(state.extras));
  return graph;
}

/** The canvas's edges as plain data, in graph order (issue and diff marking). */
export const edgeList = () => realEdges().map((e) => ({ id: e.id(), source: e.data("source"),
  target: e.data("target"), when: e.data("when") }));

export function snapshot() {
  return JSON.stringify({ graph: toGraph(), name: state.name, description: state.description });
}

export function newEdgeId() {
  state.edgeSeq += 1;
  return "x" + state.edgeSeq;
}

/** Drop the validation marks (a graph shown anew: the last problems may name other elements). */
export function clearIssueMarks() {
  if (view.cy) view.cy.elements().removeClass("has-error");
}

/** Replace the canvas with `graph` (used by load, undo/redo, import, rename). */
export function showGraph(graph, keepSelection) {
  const cy = view.cy;
  const selected = keepSelection ? cy.$("node:selected").map((n) => n.id()) : [];
  cy.batch(() => {
    cy.elements().remove();
    cy.add(G.elements(graph, state.types, "g" + (++state.edgeSeq) + "_"));
    selected.forEach((id) => cy.getElementById(id).select());
  });
  setGraphFields(graph);
  clearIssueMarks();
}

/** Settings and the other top-level keys of a graph shown or loaded. */
export function setGraphFields(graph) {
  state.settings = clone(graph.settings) || {};
  const extras = Object.assign({}, graph);
  delete extras.nodes; delete extras.edges; delete extras.settings;
  state.extras = clone(extras);
}

function restore(snap) {
  const s = JSON.parse(snap);
  state.name = s.name;
  state.description = s.description;
  showGraph(s.graph, true);
  events.emit("graph:changed", { fromHistory: true });
  events.emit("panel:render");
}

/** Record the current state as one undoable edit (no-op when nothing changed). */
export function commit() {
  if (state.history.push(snapshot())) events.emit("graph:changed", { fromHistory: false });
}

export function undo() {
  if (state.readOnly || !state.history.canUndo) return;
  restore(state.history.undo());
}

export function redo() {
  if (state.readOnly || !state.history.canRedo) return;
  restore(state.history.redo());
}

export { isDirty };

// ---------------------------------------------------------------- editing operations

export function modelPosition(clientX, clientY) {
  const cy = view.cy;
  const rect = cy.container().getBoundingClientRect();
  const pan = cy.pan();
  const zoom = cy.zoom();
  return { x: (clientX - rect.left - pan.x) / zoom, y: (clientY - rect.top - pan.y) / zoom };
}

/** Where a node added by a click goes (lib/arrange.js freeSpot): right of the selected node when
 * that is free, else the free grid cell in view nearest its centre; never on a node, an edge or an
 * edge's label. */
function freeSpot(type) {
  const cy = view.cy;
  const data = G.nodeData({ id: "new", type }, state.types);
  const boxOf = (n) => ({ id: n.id(), x: n.position("x"), y: n.position("y"), w: n.width(), h: n.height() });
  // An edge's label (or its midpoint) as a box: its 11 px monospace text, wrapped at 150 px.
  const labels = realEdges().map((e) => {
    const mid = e.midpoint();
    const chars = (e.data("display") || "").length;
    return { id: e.id(), x: mid.x, y: mid.y, w: Math.min(150, chars * 6.7) + 10, h: chars ? 10 + 15 * Math.ceil(chars * 6.7 / 150) : 10 };
  });
  const segments = realEdges().map((e) => ({ p: e.source().position(), q: e.target().position() }));
  const selected = selection();
  const near = selected.length === 1 && selected.isNode() ? boxOf(selected[0]) : null;
  return A.freeSpot({ w: data.w, h: data.h }, [...realNodes().map(boxOf), ...labels], segments, cy.extent(),
    { gap: 30, near });
}

export function addNode(type, position) {
  if (state.readOnly) return null;
  const cy = view.cy;
  const node = { id: uniqueNodeId(type, (id) => !cy.getElementById(id).empty()), type };
  const added = cy.add({ group: "nodes", data: G.nodeData(node, state.types), position: position || freeSpot(type) });
  cy.$(":selected").unselect();
  added.select();
  // No free spot in view (a crowded canvas): the node went beside the graph; bring it into view.
  const ext = cy.extent();
  const p = added.position();
  if (p.x < ext.x1 || p.x > ext.x2 || p.y < ext.y1 || p.y > ext.y2) cy.animate({ center: { eles: added }, duration: 150 });
  commit();
  return added;
}

export function addEdge(source, target, when) {
  if (state.readOnly) return null;
  const edge = { source, target };
  if (when) edge.when = when;
  const added = view.cy.add({ group: "edges", data: G.edgeData(edge, newEdgeId()) });
  view.cy.$(":selected").unselect();
  added.select();
  commit();
  return added;
}

export function deleteSelection() {
  if (state.readOnly) return;
  const selected = selection();
  if (selected.empty()) return;
  selected.remove();
  commit();
  events.emit("panel:render");
}

/** Update one field of a node's JSON (`path` like "config.prompt" or "retry.max_attempts"). */
export function setNodeField(nodeId, path, value) {
  const node = view.cy.getElementById(nodeId);
  if (node.empty()) return;
  const data = setPath(clone(node.data("node")) || {}, path.split("."), value);
  node.data("node", data);
  node.data("display", G.nodeData(Object.assign({ id: nodeId, type: node.data("type") }, data), state.types).display);
}

/** Rename a node (its edges follow); returns why not, or null when done. */
export function renameNode(oldId, newId) {
  const graph = toGraph();
  const problem = renameProblem(graph, oldId, newId);
  if (problem || oldId === newId) return problem;
  showGraph(renamed(graph, oldId, newId), false);
  view.cy.getElementById(newId).select();
  commit();
  events.emit("panel:render");
  return null;
}

export function setEdgeWhen(edge, when) {
  const rest = edge.data("edge") || {};
  const json = Object.assign({ source: edge.data("source"), target: edge.data("target") }, when ? { when } : {}, rest);
  edge.data("when", when || "");
  edge.data("conditional", when ? "yes" : "no");
  edge.data("display", G.edgeLabel(json));
}

export function setEdgeLabel(edge, label) {
  const rest = clone(edge.data("edge")) || {};
  if (label) rest.label = label; else delete rest.label;
  edge.data("edge", rest);
  setEdgeWhen(edge, edge.data("when"));
}

export function runLayout(direction) {
  if (state.readOnly) return;
  G.layout(view.cy, direction);
  commit();
}

export function zoomBy(factor) {
  const cy = view.cy;
  const rect = cy.container().getBoundingClientRect();
  cy.zoom({ level: Math.min(3, Math.max(0.15, cy.zoom() * factor)),
    renderedPosition: { x: rect.width / 2, y: rect.height / 2 } });
}
