/* A read-only graph reachable by keyboard (the instance page's live graph): the canvas takes the focus,
 * arrow keys (or N / Shift+N) walk the nodes in reading order and open each in `onPick` (the step
 * inspector), Escape closes it. What is selected is said in a live region for screen readers. */

import { el } from "./dom.js";
import { readingOrder, stepFrom } from "./node-order.js";

export function bindGraphKeys(container, cy, onPick) {
  const hint = el("p", { class: "visually-hidden", id: container.id + "-keys" },
    "Arrow keys or N select the next node and open its steps; Escape closes them.");
  const status = el("div", { class: "visually-hidden", role: "status", "aria-live": "polite" });
  container.after(hint, status);
  container.setAttribute("tabindex", "0");
  container.setAttribute("role", "application");
  container.setAttribute("aria-describedby", hint.id);
  const steps = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  container.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    let step = steps[e.key];
    if (e.key.toLowerCase() === "n") step = e.shiftKey ? -1 : 1;
    if (e.key === "Escape") {
      cy.$(":selected").unselect();
      onPick(null);
      return;
    }
    if (!step) return;
    e.preventDefault();
    const current = cy.$("node:selected");
    const id = stepFrom(readingOrder(cy.nodes().map((n) => ({ id: n.id(), x: n.position("x"), y: n.position("y") }))),
      current.length === 1 ? current.id() : null, step);
    if (id === null) return;
    cy.$(":selected").unselect();
    cy.getElementById(id).select();
    status.textContent = `Node ${id}`;
    onPick(id);
  });
}
