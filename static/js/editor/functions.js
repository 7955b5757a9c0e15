/* The function picker: under a python node's `function` field and the `compensate` field, the
 * registered python functions (GET /api/functions) with their docstrings, filtered as typed; choosing
 * one fills the field as typing it would (the field's own input/change handlers apply and commit it).
 * The docstring of the function a field names is shown under it. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { CFG, state } from "./context.js";
import { filterFunctions, functionNamed, summary } from "./function-list.js";
import { parseField } from "./model.js";

let loading = null;

/** The registered functions, fetched once per page (a failed fetch is retried on the next call). */
export function loadFunctions() {
  if (!loading) {
    loading = request("GET", CFG.urls.functions).then((data) => data.functions)
      .catch((err) => { loading = null; throw err; });
  }
  return loading;
}

/**
 * Add the picker to a field row made by forms.js field().
 * kind: "name" (the field holds the name as text) or "json" (a JSON field: the name as a JSON string).
 */
export function attachFunctionPicker(row, kind) {
  const input = row.querySelector("input, textarea");
  if (!input) return;
  const named = () => {
    if (kind === "name") return input.value.trim();
    const parsed = parseField("json", input.value);
    return parsed.error ? null : functionNamed(parsed.value);
  };
  const doc = el("div", { class: "fn-doc", "aria-live": "polite" });
  const showDoc = async () => {
    const name = named();
    if (!name) { doc.textContent = ""; return; }
    try {
      const found = (await loadFunctions()).find((f) => f.name === name);
      if (named() !== name) return; // typed on meanwhile
      doc.textContent = found ? summary(found.doc) : `'${name}' is not a registered function`;
      doc.classList.toggle("unknown", !found);
    } catch (err) {
      doc.textContent = "";
    }
  };
  input.addEventListener("input", showDoc);
  row.querySelector(".field-error").before(doc);
  showDoc();
  if (state.readOnly) return;

  const search = el("input", { type: "search", class: "fn-search", placeholder: "filter by name or docstring",
    "aria-label": "Filter the functions", autocomplete: "off" });
  const list = el("ul", { class: "fn-list" });
  const picker = el("details", { class: "fn-picker" },
    el("summary", {}, "Pick a registered function"), search, list);
  let functions = null;
  const render = () => {
    const shown = filterFunctions(functions || [], search.value);
    replaceChildren(list, shown.length ? shown.map((f) => el("li", {},
      el("button", { type: "button", class: "fn-choice", dataset: { function: f.name }, title: f.doc || f.name,
        onclick: () => choose(f.name) },
      el("code", {}, f.name), el("span", { class: "fn-summary" }, summary(f.doc)))))
      : el("li", { class: "muted" }, functions && functions.length ? "No function matches."
        : "No function is registered (see docs/graph-format.md, Node types: python)."));
  };
  const choose = (name) => {
    input.value = kind === "name" ? name : JSON.stringify(name);
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
    picker.open = false;
    input.focus();
  };
  picker.addEventListener("toggle", async () => {
    if (!picker.open) return;
    if (functions === null) {
      replaceChildren(list, el("li", { class: "muted" }, "loading…"));
      try {
        functions = await loadFunctions();
      } catch (err) {
        replaceChildren(list, el("li", { class: "error" }, "Could not load the functions: " + err.message));
        return;
      }
    }
    render();
    search.focus();
  });
  search.addEventListener("input", render);
  doc.after(picker);
}
