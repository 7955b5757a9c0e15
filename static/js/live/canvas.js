/* The live graph: cytoscape with each node filled by its state, a visit-count badge per node, taken
 * edges in green, running nodes breathing. draw(state) touches only what changed since the last draw. */

import * as G from "../lib/graph.js";
import { el } from "../lib/dom.js";

function liveStyle(colors, lightStatuses) {
  const rules = [
    { selector: "node", style: {
      "background-color": "#f1f5f9", "color": "#0f172a", "border-color": "#334155", "border-width": 2,
      "border-opacity": 0.45,
    } },
    { selector: "edge.taken", style: {
      "line-color": "#16a34a", "target-arrow-color": "#16a34a", "width": 4, "line-style": "solid",
    } },
    // Only running nodes animate (their halo breathes): other state changes redraw once.
    { selector: "node.status-running", style: {
      "transition-property": "underlay-opacity, underlay-padding", "transition-duration": "0.6s",
    } },
    { selector: "node.pulse", style: { "underlay-padding": 16, "underlay-opacity": 0.15 } },
    { selector: "node:selected", style: { "border-color": "#1d4ed8", "border-width": 5 } },
  ];
  Object.keys(colors).forEach((status) => {
    rules.push({ selector: "node.status-" + status, style: {
      "background-color": colors[status],
      "color": lightStatuses.includes(status) ? "#0f172a" : "#fff",
    } });
  });
  return G.style().concat(rules);
}

export function createCanvas(container, badgeLayer, graph, nodeTypes, meta) {
  const cyOptions = { style: liveStyle(meta.statusColors, meta.lightStatuses), autoungrabify: true,
    boxSelectionEnabled: false, maxZoom: 1.5 };
  // Positions saved by the editor are kept; otherwise a tighter layered layout than the editor's, so
  // a long chain still reads at the page's width.
  if (!G.hasPositions(graph)) cyOptions.layout = G.layoutOptions("LR", { rankSep: 45, nodeSep: 28, padding: 24 });
  const cy = G.create(container, graph, nodeTypes, { layout: "LR", cytoscape: cyOptions });

  const badges = {};
  cy.nodes().forEach((n) => {
    const b = el("span", { class: "visit-badge", hidden: true, dataset: { node: n.id() } });
    badgeLayer.appendChild(b);
    badges[n.id()] = b;
  });
  let badgeFrame = 0;
  function placeBadges() {
    badgeFrame = 0;
    cy.nodes().forEach((n) => {
      const bb = n.renderedBoundingBox({ includeLabels: false, includeUnderlay: false, includeOverlays: false });
      const b = badges[n.id()];
      b.style.left = (bb.x2 - 10) + "px";
      b.style.top = (bb.y1 - 10) + "px";
    });
  }
  // Nodes do not move (autoungrabify): badges follow only the viewport, not every redraw.
  cy.on("pan zoom resize layoutstop", () => { if (!badgeFrame) badgeFrame = requestAnimationFrame(placeBadges); });
  badgeFrame = requestAnimationFrame(placeBadges);

  // What is on screen, so a redraw touches only what changed (restyling every node costs a frame).
  const onScreen = { nodes: {}, edges: {} };
  function draw(state) {
    cy.batch(() => {
      cy.nodes().forEach((n) => {
        const id = n.id();
        const info = state.nodes[id];
        const status = info ? info.state : null;
        const visits = info ? info.visits : 0;
        const was = onScreen.nodes[id];
        if (was && was.status === status && was.visits === visits) return;
        onScreen.nodes[id] = { status, visits };
        G.setStatus(cy, id, status);
        if (status !== "running") n.removeClass("pulse");
        const b = badges[id];
        b.hidden = !visits;
        b.textContent = visits > 1 ? "×" + visits : String(visits);
        b.title = visits + " visit(s)";
      });
      cy.edges().forEach((e) => {
        const index = Number(e.id().slice(1));
        const taken = Boolean(state.edges[index]);
        if (onScreen.edges[index] === taken) return;
        onScreen.edges[index] = taken;
        e.toggleClass("taken", taken);
      });
    });
  }

  // Running nodes breathe: the pulse class toggles and cytoscape animates the halo between the two.
  let pulseOn = false;
  setInterval(() => {
    pulseOn = !pulseOn;
    cy.nodes(".status-running").forEach((n) => { n.toggleClass("pulse", pulseOn); });
  }, 700);

  function renderedState(id) {
    const n = cy.getElementById(id);
    if (n.empty()) return null;
    const cls = n.classes().find((c) => c.startsWith("status-"));
    return cls ? cls.slice(7) : null;
  }

  return { cy, draw, renderedState };
}
