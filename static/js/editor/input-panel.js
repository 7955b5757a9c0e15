/* The Workflow panel's "Start input" section: the workflow's declared input (the graph's `input`,
 * which the Run form and the API check a start against), shown field by field, with fields added
 * and removed here and the whole schema editable as JSON (descriptions, defaults, enums). */

import { el, replaceChildren } from "../lib/dom.js";
import { state } from "./context.js";
import { clone } from "./model.js";
import { commit } from "./canvas.js";
import { field, section } from "./forms.js";
import { INPUT_TYPES, addInputField, inputSummary, removeInputField } from "./input-schema.js";

const declared = () => state.extras.input;

function setInput(schema) {
  if (schema === undefined) delete state.extras.input; else state.extras.input = clone(schema);
}

function summaryList(rerender) {
  const rows = inputSummary(declared());
  if (!rows.length) {
    return el("p", { class: "muted", id: "input-none" },
      "No declared input: the Run form asks for any JSON object. Add the fields a run starts from.");
  }
  return el("ul", { class: "input-fields", id: "input-fields" }, rows.map((r) => el("li", { "data-field": r.name },
    el("code", {}, r.name), ` ${r.type}`, r.required ? el("span", { class: "badge" }, "required") : null,
    r.default !== undefined ? el("span", { class: "muted" }, ` default ${JSON.stringify(r.default)}`) : null,
    r.description ? el("div", { class: "muted" }, r.description) : null,
    state.readOnly ? null : el("button", { type: "button", class: "link-button", "aria-label": `Remove input field ${r.name}`,
      onclick: () => { setInput(removeInputField(declared(), r.name)); commit(); rerender(); } }, "Remove"))));
}

/** The section; `rerender` redraws the panel (after an add or a remove). */
export function inputSection(rerender) {
  const summary = el("div", { id: "input-summary" }, summaryList(rerender));
  const children = [summary];
  if (!state.readOnly) {
    const name = el("input", { id: "input-new-name", class: "code", autocomplete: "off", placeholder: "e.g. ticket" });
    const type = el("select", { id: "input-new-type" }, INPUT_TYPES.map((t) => el("option", { value: t }, t)));
    const required = el("input", { type: "checkbox", id: "input-new-required", checked: true });
    const problem = el("div", { class: "field-error", id: "input-new-error", "aria-live": "polite" });
    const add = () => {
      const result = addInputField(declared(), name.value, type.value, required.checked);
      if (result.error) { replaceChildren(problem, result.error); return; }
      setInput(result.schema);
      commit();
      rerender();
      const again = document.getElementById("input-new-name");
      if (again) again.focus();
    };
    name.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); add(); } });
    children.push(el("div", { class: "input-add" },
      el("label", { for: "input-new-name" }, "Field name"), name,
      el("label", { for: "input-new-type" }, "Type"), type,
      el("label", { class: "check" }, required, " required"),
      el("button", { type: "button", id: "input-add", onclick: add }, "Add input field"), problem));
  }
  children.push(el("details", { class: "input-json" }, el("summary", {}, "Edit as JSON Schema"),
    field({ path: "input", label: "Input schema (JSON)", kind: "json", value: declared(), rows: 6,
      apply: setInput, check: () => replaceChildren(summary, summaryList(rerender)), help: "type, description, default, examples, enum, minimum… per field; required: [names]" })));
  return section("Start input (the Run form)", ...children);
}
