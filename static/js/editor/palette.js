/* The palette of node types: click to add a node, or drag one onto the canvas. */

import { el } from "../lib/dom.js";
import { state, view } from "./context.js";
import { addNode, modelPosition } from "./canvas.js";
import { renderPanel } from "./panel.js";

export function buildPalette() {
  const box = document.getElementById("palette-items");
  state.typeOrder.forEach((name) => {
    const t = state.types[name];
    const item = el("button", { type: "button", class: "palette-item", "data-type": name, disabled: state.readOnly,
      title: state.readOnly ? t.label : `Add a ${t.label} node (drag onto the canvas, or click)` },
      el("span", { class: "type-chip", style: `background:${t.color}` }, t.icon), el("span", {}, t.label));
    let dragged = false;
    item.addEventListener("pointerdown", (down) => {
      if (state.readOnly || down.button !== 0) return;
      dragged = false;
      let ghost = null;
      const move = (e) => {
        if (!ghost && Math.hypot(e.clientX - down.clientX, e.clientY - down.clientY) > 5) {
          ghost = el("div", { class: "palette-ghost", style: `background:${t.color}` }, `${t.icon} ${t.label}`);
          document.body.append(ghost);
        }
        if (ghost) {
          ghost.style.left = e.clientX + "px";
          ghost.style.top = e.clientY + "px";
        }
      };
      const up = (e) => {
        document.removeEventListener("pointermove", move);
        document.removeEventListener("pointerup", up);
        if (!ghost) return;
        ghost.remove();
        dragged = true;
        const rect = view.cy.container().getBoundingClientRect();
        if (e.clientX >= rect.left && e.clientX <= rect.right && e.clientY >= rect.top && e.clientY <= rect.bottom) {
          addNode(name, modelPosition(e.clientX, e.clientY));
          renderPanel();
        }
      };
      document.addEventListener("pointermove", move);
      document.addEventListener("pointerup", up);
    });
    item.addEventListener("click", () => {
      if (dragged) { dragged = false; return; }
      addNode(name);
      renderPanel();
    });
    box.append(item);
  });
}
