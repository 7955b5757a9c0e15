/* A JSON viewer: objects and arrays fold (<details>, open to `openDepth`), scalars coloured by type,
 * and a copy button for the whole document. Used by the instance page's input and context panel and
 * the review page's context.
 *
 *   jsonPanel(value, { openDepth: 2 })  -> element;  panel.update(value) re-renders in place
 */

import { el, replaceChildren } from "../lib/dom.js";

function scalar(v) {
  const type = v === null ? "null" : typeof v;
  return el("span", { class: "jv-" + type }, type === "string" ? JSON.stringify(v) : String(v));
}

export function jsonTree(value, depth, openDepth) {
  if (value === null || typeof value !== "object") return scalar(value);
  const isArray = Array.isArray(value);
  const keys = Object.keys(value);
  if (!keys.length) return el("span", { class: "jv-empty" }, isArray ? "[]" : "{}");
  const summary = el("summary", {}, isArray ? "[" + keys.length + " items]" : "{" + keys.length + " keys}");
  return el("details", { class: "jv-node", open: depth < openDepth }, summary,
    el("ul", {}, keys.map((k) => el("li", {},
      isArray ? null : el("span", { class: "jv-key" }, k + ": "),
      jsonTree(value[k], depth + 1, openDepth)))));
}

export function jsonPanel(value, { openDepth = 2, label = "JSON" } = {}) {
  // Focusable: it scrolls, and a long string leaves nothing inside it to Tab to (axe: scrollable-region-focusable).
  const body = el("div", { class: "jv-body", tabindex: "0" });
  const msg = el("span", { class: "hint jv-msg", role: "status" });
  let current = value;
  const copy = el("button", { type: "button", class: "jv-copy", "aria-label": "Copy " + label, onclick: async () => {
    const text = JSON.stringify(current, null, 2);
    try {
      await navigator.clipboard.writeText(text);
      msg.textContent = "copied";
    } catch (e) {
      // No clipboard (an insecure origin): select the text so the user copies it.
      const area = el("textarea", { class: "jv-raw", readonly: true, rows: 6 });
      area.value = text;
      replaceChildren(body, area);
      area.select();
      msg.textContent = "press Ctrl+C";
    }
    setTimeout(() => { msg.textContent = ""; }, 2000);
  } }, "Copy");
  const root = el("div", { class: "jv" }, el("div", { class: "jv-tools" }, copy, msg), body);
  root.update = (v) => {
    current = v;
    root.dataset.json = JSON.stringify(v);
    replaceChildren(body, jsonTree(v, 0, openDepth));
  };
  root.update(value);
  return root;
}
