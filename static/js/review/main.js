/* The review page: why the item is open, the decision form for its reason (panel.js), the instance's
 * context and input (live/json-view.js), and its graph read-only with each node's latest state and visit
 * count (the live view's canvas). After a decision, and on `n`, the next open item opens. */

import { byId as $, jsonScript } from "../lib/dom.js";
import { meta } from "../lib/meta.js";
import { createCanvas } from "../live/canvas.js";
import { jsonPanel } from "../live/json-view.js";
import { bindShortcuts, createDecisionPanel } from "./panel.js";

const cfg = jsonScript("review-config");
const next = () => { window.location.href = cfg.urls.next; };

$("rv-context").appendChild(jsonPanel(cfg.instance.context, { label: "context" }));
$("rv-input").appendChild(jsonPanel(cfg.instance.input, { label: "input", openDepth: 1 }));

if ($("rv-form")) {
  const panel = createDecisionPanel({
    why: $("rv-why"), form: $("rv-form"), buttons: $("rv-buttons"), msg: $("review-msg"),
    canDecide: cfg.canDecide, nodes: cfg.nodes, decideUrl: cfg.urls.decide,
    onDecided: next,
  });
  panel.show(Object.assign({}, cfg.item, { why: cfg.why, details: {} }), cfg.instance.context);
  bindShortcuts(panel, { next });
  window.steadyflowReview = { panel };
} else {
  bindShortcuts({ decide: () => null }, { next });
}

if (window.cytoscape) {
  const canvas = createCanvas($("cy"), $("badges"), jsonScript("review-graph-json"),
    jsonScript("review-node-types"), meta());
  canvas.draw({ nodes: jsonScript("review-node-states"), edges: {} });
  $("review-graph").dataset.ready = "1";
  window.steadyflowReviewGraph = canvas;
}
