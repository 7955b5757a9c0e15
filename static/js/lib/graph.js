/* Steadyflow graph drawing shared by the editor and the live instance view.
 *
 * Builds cytoscape elements from the graph JSON of docs/DESIGN.md and styles each node by its
 * type's colour and icon (from GET /api/node-types). Nothing here edits anything: the editor adds its
 * own behaviour on top (static/js/editor/canvas.js). Status colours come from the server (lib/meta.js).
 * Needs the vendored cytoscape (and cytoscape-dagre) loaded as classic scripts before the modules.
 *
 *   const cy = create(container, graph, nodeTypes, {layout: "LR"});
 *   setStatus(cy, "classify", "running");   // live view: status-<name> classes
 */
import { meta } from "./meta.js";
import { bendFor } from "./edge-route.js";
import { layered, viewportFor } from "./arrange.js";

const DEFAULT_COLOR = "#64748b";
const SIZES = {
  start: { shape: "ellipse", width: 110, height: 46 },
  end: { shape: "ellipse", width: 110, height: 46 },
  router: { shape: "round-diamond", width: 150, height: 76 },
};
const DEFAULT_SIZE = { shape: "round-rectangle", width: 150, height: 50 };
/** A node's text size (px at zoom 1), and the least it should measure on screen: the editor opens a
 * graph and lays it out at a zoom of at least READABLE_PX / NODE_FONT (lib/arrange.js viewportFor). */
export const NODE_FONT = 13;
export const READABLE_PX = 11;
export const readableZoom = () => READABLE_PX / NODE_FONT;
/** Instance and step statuses (workflows/engine/statuses.py) -> the colour of the halo around a node. */
export const statusColors = () => meta().statusColors;

/** Node types as a name -> type map, from the /api/node-types list (or a map already). */
export function typeIndex(nodeTypes) {
  if (!nodeTypes) return {};
  if (Array.isArray(nodeTypes)) {
    const out = {};
    nodeTypes.forEach((t) => { out[t.name] = t; });
    return out;
  }
  return nodeTypes;
}

export function nodeLabel(node, type) {
  const icon = type && type.icon ? type.icon + "  " : "";
  const title = node.label || node.id;
  const kind = type ? type.label || type.name : node.type;
  return icon + title + "\n" + (node.label ? node.id + " · " : "") + kind;
}

export const EDGE_LABEL_MOST = 60;          // characters; longer labels end in "…" (the panel shows the whole)
const EDGE_LABEL_WIDTH = 150;               // px: a label wraps at spaces to this width
const CHAR_WIDTH = 6.7;                     // px per character of the 11 px monospace label font
const LINE_HEIGHT = 15;

export function edgeLabel(edge) {
  const text = edge.label || edge.when || "";
  return text.length > EDGE_LABEL_MOST ? text.slice(0, EDGE_LABEL_MOST - 1) + "…" : text;
}

/** The gap between two layers an edge's label needs to sit between its nodes without covering them
 * (LR: its width, wrapped at EDGE_LABEL_WIDTH; TB: its wrapped lines' height), plus room for the
 * arrow; 0 for an edge without a label. */
export function edgeLabelRoom(edge, direction) {
  const text = edgeLabel(edge);
  if (!text) return 0;
  const width = Math.min(text.length, Math.floor(EDGE_LABEL_WIDTH / CHAR_WIDTH)) * CHAR_WIDTH;
  const lines = Math.ceil((text.length * CHAR_WIDTH) / EDGE_LABEL_WIDTH);
  return Math.round(direction === "TB" ? lines * LINE_HEIGHT + 44 : width + 48);
}

/** The gap the graph's widest edge label needs (see edgeLabelRoom): dagre has one gap for all layers. */
export function labelRoom(graph, direction) {
  return Math.max(0, ...(graph.edges || []).map((edge) => edgeLabelRoom(edge, direction)));
}

/** Dagre options with at least the layer gap the graph's edge labels need (see labelRoom). */
export function withLabelRoom(options, graph) {
  if (!options || options.name !== "dagre") return options;
  const room = labelRoom(graph, options.rankDir === "TB" ? "TB" : "LR");
  return Object.assign({}, options, { rankSep: Math.max(options.rankSep || 0, room) });
}

/** The data a cytoscape node carries: id, type, the node JSON's other fields, and display data. */
export function nodeData(node, types) {
  const type = types[node.type];
  const rest = Object.assign({}, node);
  delete rest.id; delete rest.type; delete rest.position;
  const size = SIZES[node.type] || DEFAULT_SIZE;
  return {
    id: node.id, type: node.type, node: rest,
    display: nodeLabel(node, type), color: (type && type.color) || DEFAULT_COLOR,
    shape: size.shape, w: size.width, h: size.height,
  };
}

export function edgeData(edge, id) {
  const rest = Object.assign({}, edge);
  delete rest.source; delete rest.target; delete rest.when;
  return {
    id: id, source: edge.source, target: edge.target, when: edge.when || "", edge: rest,
    display: edgeLabel(edge), conditional: edge.when ? "yes" : "no",
  };
}

/** Cytoscape element definitions for a graph; edges get ids `<prefix><index>`. */
export function elements(graph, nodeTypes, edgePrefix) {
  const types = typeIndex(nodeTypes);
  const prefix = edgePrefix || "e";
  const out = [];
  (graph.nodes || []).forEach((node) => {
    const el = { group: "nodes", data: nodeData(node, types) };
    if (node.position && typeof node.position.x === "number" && typeof node.position.y === "number") {
      el.position = { x: node.position.x, y: node.position.y };
    }
    out.push(el);
  });
  (graph.edges || []).forEach((edge, i) => {
    out.push({ group: "edges", data: edgeData(edge, prefix + i) });
  });
  return out;
}

export function hasPositions(graph) {
  const nodes = graph.nodes || [];
  return nodes.length > 0 && nodes.every((n) => n.position && typeof n.position.x === "number"
    && typeof n.position.y === "number");
}

export function style() {
  const rules = [
    { selector: "node[type]", style: {
      "shape": "data(shape)", "width": "data(w)", "height": "data(h)",
      "background-color": "data(color)", "background-opacity": 0.95,
      "border-width": 2, "border-color": "#0f172a", "border-opacity": 0.25,
      "label": "data(display)", "color": "#fff", "font-size": NODE_FONT, "font-weight": 600,
      "text-valign": "center", "text-halign": "center", "text-wrap": "wrap", "text-max-width": 140,
      "line-height": 1.35, "font-family": "system-ui, sans-serif",
    } },
    { selector: "node:selected", style: {
      "border-width": 4, "border-color": "#1d4ed8", "border-opacity": 1,
      "underlay-color": "#3b82f6", "underlay-padding": 6, "underlay-opacity": 0.25,
    } },
    // Edges between the same two nodes (both ways: a loop's forward and back edge) fan out by
    // control-point-step-size, so neither hides the other or its label.
    { selector: "edge", style: {
      "width": 2, "curve-style": "bezier", "target-arrow-shape": "triangle", "control-point-step-size": 56,
    } },
    // Labels stay horizontal (read without tilting the head), wrap instead of running over nodes, and
    // sit on an opaque box with a border, so a line or another edge behind them does not cut them.
    { selector: "edge[display]", style: {
      "width": 2, "line-color": "#64748b", "target-arrow-color": "#64748b", "target-arrow-shape": "triangle",
      "curve-style": "bezier", "arrow-scale": 1.2,
      "label": "data(display)", "font-size": 11, "color": "#1e293b", "text-rotation": "none",
      "text-wrap": "wrap", "text-max-width": EDGE_LABEL_WIDTH, "line-height": 1.3,
      "text-background-color": "#fff", "text-background-opacity": 1, "text-background-padding": 3,
      "text-background-shape": "roundrectangle",
      "text-border-width": 1, "text-border-color": "#cbd5e1", "text-border-opacity": 1,
      "font-family": "ui-monospace, monospace",
    } },
    // A conditional edge: thicker, dashed and violet, its label framed in violet.
    { selector: "edge[conditional = 'yes']", style: {
      "width": 2.5, "line-style": "dashed", "line-dash-pattern": [7, 4], "line-color": "#7c3aed",
      "target-arrow-color": "#7c3aed", "color": "#4c1d95", "text-border-color": "#a78bfa",
    } },
    { selector: "edge:selected", style: {
      "width": 4, "line-color": "#1d4ed8", "target-arrow-color": "#1d4ed8",
    } },
    // Validation problems, diff highlights.
    { selector: ".has-error", style: {
      "underlay-color": "#dc2626", "underlay-padding": 9, "underlay-opacity": 0.35,
      "border-color": "#dc2626", "border-width": 4, "border-opacity": 1,
    } },
    { selector: "edge.has-error", style: {
      "line-color": "#dc2626", "target-arrow-color": "#dc2626", "width": 4, "underlay-padding": 4,
    } },
    { selector: ".diff-added", style: { "underlay-color": "#16a34a", "underlay-padding": 9, "underlay-opacity": 0.4 } },
    { selector: ".diff-changed", style: { "underlay-color": "#f59e0b", "underlay-padding": 9, "underlay-opacity": 0.45 } },
    { selector: ".diff-moved", style: { "underlay-color": "#38bdf8", "underlay-padding": 6, "underlay-opacity": 0.3 } },
    // Edge drawing (cytoscape-edgehandles).
    { selector: ".eh-source, .eh-target", style: { "border-width": 4, "border-color": "#f59e0b", "border-opacity": 1 } },
    { selector: ".eh-preview, .eh-ghost-edge", style: {
      "line-color": "#f59e0b", "target-arrow-color": "#f59e0b", "source-arrow-color": "#f59e0b",
    } },
    { selector: ".eh-ghost-edge.eh-preview-active", style: { "opacity": 0 } },
    { selector: ".eh-ghost-node", style: { "width": 1, "height": 1, "opacity": 0, "label": "" } },
  ];
  const colors = statusColors();
  Object.keys(colors).forEach((status) => {
    rules.push({ selector: "node.status-" + status, style: {
      "underlay-color": colors[status], "underlay-padding": 8, "underlay-opacity": 0.55,
    } });
  });
  return rules;
}

export function layoutOptions(direction, extra) {
  return Object.assign({
    name: "dagre", rankDir: direction === "TB" ? "TB" : "LR", nodeSep: 44, rankSep: 64, edgeSep: 30,
    fit: true, padding: 40, animate: false,
  }, extra || {});
}

/** The editor's Layout: the whole graph in layers by its edges (lib/arrange.js layered), left to
 * right ("LR") or top to bottom ("TB"), compact (only the gaps with edge labels widen for them), then
 * shown whole at a readable size when it fits (fitReadable). */
export function layout(cy, direction) {
  const dir = direction === "TB" ? "TB" : "LR";
  const nodes = cy.nodes("[type]").map((n) => ({ id: n.id(), w: n.width(), h: n.height(), last: n.data("type") === "end" }));
  const edges = cy.edges("[display]").map((e) => ({ source: e.data("source"), target: e.data("target"),
    room: edgeLabelRoom({ when: e.data("when"), label: (e.data("edge") || {}).label }, dir) }));
  const positions = layered(nodes, edges, { direction: dir, rankSep: 50, nodeSep: 36 });
  cy.batch(() => nodes.forEach((n) => cy.getElementById(n.id).position(positions[n.id])));
  routeEdges(cy);
  fitReadable(cy);
}

/** Show the graph as large as fits, but never so small that a node's text measures under READABLE_PX
 * on screen (a bigger graph is shown from its start; the rest is a pan or the Fit button away) nor
 * above 1.2x (a small graph stays a graph). What the editor opens, lays out and imports at. */
export function fitReadable(cy) {
  cy.resize(); // the canvas may have changed size since cytoscape measured it (panels, banners)
  const shown = cy.$("node[type], edge[display]");
  if (shown.empty()) return;
  const bb = shown.boundingBox({ includeOverlays: false, includeUnderlays: false });
  const v = viewportFor(bb, cy.width(), cy.height(), { padding: 24, minZoom: readableZoom(), maxZoom: 1.2 });
  cy.viewport({ zoom: v.zoom, pan: v.pan });
}

const BEND_STYLE = "curve-style control-point-distances control-point-weights";

/** Bend every edge that would run straight through another node around it (lib/edge-route.js); an
 * edge that no longer needs it goes back to the shared bezier style. Call after positions change. */
export function routeEdges(cy) {
  const boxes = cy.nodes("[type]").map((n) => {
    const p = n.position();
    return { id: n.id(), x: p.x, y: p.y, w: n.width(), h: n.height() };
  });
  cy.batch(() => {
    cy.edges("[display]").forEach((edge) => {
      const source = edge.source();
      const target = edge.target();
      const bend = source.same(target) ? 0 : bendFor(source.position(), target.position(),
        boxes.filter((b) => b.id !== source.id() && b.id !== target.id()));
      if (bend) {
        edge.addClass("bent").style({ "curve-style": "unbundled-bezier", "control-point-distances": bend,
          "control-point-weights": 0.5 });
      } else if (edge.hasClass("bent")) {
        edge.removeClass("bent").removeStyle(BEND_STYLE);
      }
    });
  });
}

/** Fit the graph in view, but never zoom in past `maxZoom`: a small graph stays readable, not huge. */
export function fit(cy, padding, maxZoom) {
  cy.fit(undefined, padding === undefined ? 40 : padding);
  const limit = maxZoom || 1.2;
  if (cy.zoom() > limit) {
    cy.zoom(limit);
    cy.center();
  }
}

/** A cytoscape instance showing `graph`. Saved positions are kept; without them, dagre lays it out. */
export function create(container, graph, nodeTypes, options) {
  const opts = options || {};
  const positioned = hasPositions(graph);
  const settings = Object.assign({
    container: container,
    elements: elements(graph, nodeTypes),
    style: style(),
    layout: positioned ? { name: "preset", fit: false } : layoutOptions(opts.layout, { fit: false }),
    minZoom: 0.15, maxZoom: 3,
  }, opts.cytoscape || {});
  // Whoever chose the layer gap (the live view's is tighter), the edge labels get their room.
  settings.layout = withLabelRoom(settings.layout, graph);
  const cy = window.cytoscape(settings);
  routeEdges(cy);
  fit(cy);
  return cy;
}

/** Live view: show one status on a node (replaces the previous status class). */
export function setStatus(cy, nodeId, status) {
  const node = cy.getElementById(nodeId);
  if (node.empty()) return;
  Object.keys(statusColors()).forEach((s) => node.removeClass("status-" + s));
  if (status) node.addClass("status-" + status);
}
