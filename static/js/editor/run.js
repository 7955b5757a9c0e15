/* The Run dialog: start an instance of the latest saved version. When that version declares its
 * start input (the graph's `input` schema), the dialog is a form of its fields (descriptions,
 * defaults, examples), checked as typed; "Raw JSON" switches to the JSON text (both stay in step).
 * The server's field-named errors (400 {fields: {name: message}}) land on their fields. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { CFG, state, isDirty } from "./context.js";
import { parseStartInput } from "./model.js";
import { fieldPlaceholder, fieldText, inputFields, inputFromTexts, inputProblems } from "./run-input.js";

const $ = (sel) => document.querySelector(sel);
const run = { schema: null, specs: [], raw: true, extra: {} };

/** The declared input of the latest version (null: none declared). */
async function latestInputSchema() {
  const data = await request("GET", `${CFG.urls.version}${state.latest}`);
  const schema = data.graph && data.graph.input;
  return schema && typeof schema === "object" && schema.properties ? schema : null;
}

function fieldInput(spec, id) {
  const common = { id, name: spec.name, "data-field": spec.name, "aria-describedby": id + "-error" };
  if (spec.kind === "enum" || spec.kind === "bool") {
    const options = spec.kind === "bool" ? [true, false] : spec.options;
    return el("select", common, el("option", { value: "" }, spec.default !== undefined ? `— (default ${JSON.stringify(spec.default)})` : "—"),
      options.map((o) => el("option", { value: fieldText(spec, o) }, typeof o === "string" ? o : JSON.stringify(o))));
  }
  if (spec.kind === "json" || spec.kind === "textarea") {
    return el("textarea", Object.assign(common, { rows: spec.kind === "json" ? 3 : 4, spellcheck: "false",
      placeholder: fieldPlaceholder(spec) }));
  }
  const number = spec.kind === "integer" || spec.kind === "number";
  return el("input", Object.assign(common, { type: number ? "number" : "text", autocomplete: "off",
    step: spec.kind === "integer" ? "1" : (number ? "any" : undefined), min: spec.min, max: spec.max,
    placeholder: fieldPlaceholder(spec) }));
}

function renderFields() {
  const box = replaceChildren($("#run-fields"), run.specs.map((spec) => {
    const id = "run-f-" + spec.name.replace(/[^A-Za-z0-9_-]/g, "-");
    const input = fieldInput(spec, id);
    input.addEventListener(input.tagName === "SELECT" ? "change" : "input", check);
    return el("div", { class: "field", "data-path": spec.name },
      el("label", { for: id }, spec.label, spec.required ? el("span", { class: "req", title: "required" }, " *") : null),
      input, spec.help ? el("div", { class: "help" }, spec.help) : null,
      el("div", { class: "field-error", id: id + "-error", "data-error-for": spec.name }));
  }));
  return box;
}

/** Fill the form from a start input (a declared field's default when the input lacks it). */
function fillForm(value) {
  run.specs.forEach((spec) => {
    const input = $("#run-fields").querySelector(`[data-field="${CSS.escape(spec.name)}"]`);
    const v = value[spec.name] !== undefined ? value[spec.name] : spec.default;
    input.value = fieldText(spec, v);
  });
  // Keys the form has no field for are kept (the raw JSON may hold them; the server says if they are wrong).
  run.extra = Object.assign({}, value);
  run.specs.forEach((spec) => { delete run.extra[spec.name]; });
}

function formTexts() {
  const texts = {};
  run.specs.forEach((spec) => {
    texts[spec.name] = $("#run-fields").querySelector(`[data-field="${CSS.escape(spec.name)}"]`).value;
  });
  return texts;
}

function showFieldErrors(errors) {
  $("#run-fields").querySelectorAll(".field-error").forEach((box) => {
    const message = errors[box.dataset.errorFor] || "";
    box.textContent = message;
    box.closest(".field").classList.toggle("invalid", Boolean(message));
  });
}

/** The start input as the dialog holds it: {value} or {error, fields}. */
function current() {
  if (run.raw) {
    const parsed = parseStartInput($("#run-input").value);
    if (parsed.error) return parsed;
    const fields = inputProblems(run.schema, parsed.value);
    return Object.keys(fields).length ? { value: parsed.value, fields } : parsed;
  }
  const { value, errors } = inputFromTexts(run.specs, formTexts(), run.extra);
  const fields = Object.assign(inputProblems(run.schema, value), errors);
  return Object.keys(fields).length ? { value, fields } : { value };
}

/** Check the input as typed: field errors on the form, a summary line, Start disabled while wrong. */
function check() {
  const result = current();
  const fields = result.fields || {};
  if (!run.raw) showFieldErrors(fields);
  const named = Object.entries(fields).map(([k, m]) => (k ? `input.${k}: ${m}` : `input: ${m}`));
  const problem = result.error || (run.raw && named.length ? named.join("; ") : null);
  const err = $("#run-error");
  err.textContent = problem || "";
  err.hidden = !problem;
  $("#run-confirm").disabled = Boolean(result.error || named.length);
  return !result.error && !named.length;
}

function setRaw(raw) {
  if (raw === run.raw) return;
  if (raw) {
    const { value } = current();
    $("#run-input").value = JSON.stringify(value || {}, null, 2);
  } else {
    const parsed = parseStartInput($("#run-input").value);
    if (parsed.error) { check(); return; } // stay on the text until it parses
    fillForm(parsed.value);
  }
  run.raw = raw;
  $("#run-raw").hidden = !raw;
  $("#run-fields").hidden = raw;
  const toggle = $("#run-raw-toggle");
  toggle.textContent = raw ? "Form" : "Raw JSON";
  toggle.setAttribute("aria-pressed", raw ? "true" : "false");
  check();
}

export async function openRun() {
  if (!CFG.canRun || state.latest === null) return;
  $("#run-version").textContent = `${state.name} v${state.latest}`;
  $("#run-dirty").hidden = !isDirty();
  try {
    run.schema = await latestInputSchema();
  } catch (err) {
    run.schema = null; // the raw JSON still works; the server checks the input anyway
  }
  run.specs = inputFields(run.schema);
  const hasForm = run.specs.length > 0;
  $("#run-raw-toggle").hidden = !hasForm;
  run.raw = true;
  $("#run-raw").hidden = false;
  $("#run-fields").hidden = true;
  if (hasForm) {
    renderFields();
    fillForm({});
    setRaw(false);
  }
  check();
  $("#run-dialog").showModal();
  (hasForm ? $("#run-fields").querySelector("input, select, textarea") : $("#run-input")).focus();
}

async function doRun() {
  if (!check()) return;
  const { value } = current();
  $("#run-confirm").disabled = true;
  try {
    const data = await request("POST", CFG.urls.start, { input: value });
    state.history.markSaved(); // a run is not an edit: leave without asking
    location.href = CFG.urls.instance.replace("{id}", data.id);
  } catch (exc) {
    const err = $("#run-error");
    err.textContent = exc.message || `starting failed (${exc.status})`;
    err.hidden = false;
    if (exc.data && exc.data.fields && !run.raw) showFieldErrors(exc.data.fields);
  } finally {
    $("#run-confirm").disabled = false;
  }
}

export function bindRunDialog() {
  $("#run-form").addEventListener("submit", (e) => { e.preventDefault(); doRun(); });
  $("#run-input").addEventListener("input", check);
  $("#run-raw-toggle").addEventListener("click", () => setRaw(!run.raw));
  $("#run-cancel").addEventListener("click", () => $("#run-dialog").close());
}
