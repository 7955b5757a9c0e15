/* The one DOM helper every page uses: el(tag, attrs, ...children).
 *
 *   el("a", { href: "/x", class: "button", onclick: go }, "Open ", el("strong", {}, "v3"))
 *
 * attrs: `class`, `text`, `dataset` (object), `style` (set through the CSSOM: a style *attribute* is
 * inline style, which the Content-Security-Policy refuses), `on<event>` (a listener), anything else
 * an attribute (true: present and empty; false, null or undefined: left out). Children are nodes or
 * text; arrays are flattened, null/undefined/false skipped.
 */

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => {
    if (v === undefined || v === null || v === false) return;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = String(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v === true ? "" : v);
  });
  children.flat(Infinity).forEach((c) => {
    if (c === undefined || c === null || c === false) return;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  });
  return node;
}

/** document.getElementById. */
export const byId = (id) => document.getElementById(id);

/** The parsed content of a `json_script` block. */
export function jsonScript(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : null;
}

/** Replace an element's children (none: empty it). */
export function replaceChildren(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}
