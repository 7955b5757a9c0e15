/* The review page's graph: the instance's version, each node coloured by its latest step status. */
(function () {
  "use strict";
  const box = document.getElementById("review-graph");
  if (!box || !window.SteadyflowGraph) return;
  const graph = JSON.parse(document.getElementById("review-graph-json").textContent);
  const statuses = JSON.parse(document.getElementById("review-node-status").textContent);
  fetch("/api/node-types", { credentials: "same-origin" })
    .then((r) => r.json())
    .then((data) => {
      const cy = window.SteadyflowGraph.create(box, graph, data.node_types, { layout: "LR" });
      Object.entries(statuses).forEach(([node, status]) => {
        if (cy.getElementById(node).length) window.SteadyflowGraph.setStatus(cy, node, status);
      });
      box.dataset.ready = "1";
    });
})();
