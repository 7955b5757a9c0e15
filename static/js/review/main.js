/* The review page's graph: the instance's version, each node coloured by its latest step status. */

import * as G from "../lib/graph.js";
import { byId, jsonScript } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";

const box = byId("review-graph");
if (box && window.cytoscape) {
  const graph = jsonScript("review-graph-json");
  const statuses = jsonScript("review-node-status");
  getJSON("/api/node-types").then((data) => {
    const cy = G.create(box, graph, data.node_types, { layout: "LR" });
    Object.entries(statuses).forEach(([node, status]) => {
      if (cy.getElementById(node).length) G.setStatus(cy, node, status);
    });
    box.dataset.ready = "1";
  });
}
