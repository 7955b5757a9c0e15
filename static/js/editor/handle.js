/* Drawing edges: the handle shown on a hovered node (drag it onto another node), and connect mode
 * (`C`: drag from any node), both through cytoscape-edgehandles. */

import { state, view } from "./context.js";
import { isReal, modelPosition } from "./canvas.js";

let handleNode = null;
let hideTimer = null;
const handle = () => document.getElementById("edge-handle");

export function setConnectMode(on) {
  if (state.readOnly || !view.eh) return;
  state.connectMode = on;
  if (on) view.eh.enableDrawMode(); else view.eh.disableDrawMode();
  const button = document.getElementById("btn-connect");
  button.setAttribute("aria-pressed", on ? "true" : "false");
  button.classList.toggle("active", on);
  view.cy.container().classList.toggle("connect-mode", on);
  hideHandle();
}

function showHandle(node) {
  if (state.readOnly || state.connectMode || (view.eh && view.eh.active)) return;
  clearTimeout(hideTimer);
  handleNode = node;
  const bb = node.renderedBoundingBox({ includeLabels: false, includeOverlays: false, includeUnderlays: false });
  const h = handle();
  h.style.left = (bb.x2 - 8) + "px";
  h.style.top = ((bb.y1 + bb.y2) / 2 - 8) + "px";
  h.dataset.node = node.id();
  h.hidden = false;
}

export function hideHandle() {
  clearTimeout(hideTimer);
  handle().hidden = true;
}

export function setupHandle() {
  const { cy, eh } = view;
  const h = handle();
  h.addEventListener("pointerenter", () => clearTimeout(hideTimer));
  h.addEventListener("pointerleave", () => {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hideHandle, 300);
  });
  h.addEventListener("pointerdown", (down) => {
    if (!handleNode || down.button !== 0) return;
    down.preventDefault();
    down.stopPropagation();
    const source = handleNode;
    hideHandle();
    eh.start(source);
    const move = (e) => eh.update(modelPosition(e.clientX, e.clientY));
    const up = (e) => {
      document.removeEventListener("pointermove", move);
      document.removeEventListener("pointerup", up);
      // Snap to the node under the pointer now: edgehandles' own snapping is throttled.
      eh.update(modelPosition(e.clientX, e.clientY));
      eh.snap();
      eh.stop();
    };
    document.addEventListener("pointermove", move);
    document.addEventListener("pointerup", up);
  });
  // mousemove too: after a gesture that began on the handle, cytoscape's hover tracking has not seen
  // the pointer leave the source node, so hovering it again emits no new mouseover.
  cy.on("mouseover mousemove", "node", (e) => {
    if (isReal(e.target) && (handle().hidden || handleNode !== e.target)) showHandle(e.target);
  });
  cy.on("mouseout", "node", (e) => {
    if (e.target !== handleNode) return;
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hideHandle, 400);
  });
  cy.on("viewport", hideHandle);
  // Leaving the canvas emits no mouseout on the node: hide unless the pointer went onto the handle.
  cy.container().addEventListener("mouseleave", () => {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hideHandle, 300);
  });
  cy.on("drag remove", "node", (e) => { if (e.target === handleNode) hideHandle(); });
}
