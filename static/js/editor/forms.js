/* Forms from JSON Schema for the side panel: one field per property, parsed and checked as typed
 * (lib/schema-check.js: Ajv's interface without its eval, which the CSP forbids). */

import { el } from "../lib/dom.js";
import { compile } from "../lib/schema-check.js";
import { events, state } from "./context.js";
import { errorsByPath, parseField } from "./model.js";
import { commit } from "./canvas.js";

const panel = () => document.getElementById("panel");
const compiled = {};

function validator(key, schema) {
  if (!compiled[key]) {
    try {
      compiled[key] = compile(schema);
    } catch (exc) {
      compiled[key] = () => true; // a schema the checker cannot compile: leave it to the server's validator
    }
  }
  return compiled[key];
}

/** Schema errors as {path: message}: "config.prompt", "retry.max_attempts", "" for the whole object. */
export function schemaErrors(key, schema, value, prefix) {
  const validate = validator(key, schema);
  if (validate(value)) return {};
  return errorsByPath(validate.errors, prefix);
}

/** The input element of a field spec, showing spec.value. */
export function fieldInput(spec, id) {
  let input;
  const current = spec.value;
  if (spec.kind === "select" || spec.kind === "bool") {
    const options = spec.kind === "bool" ? ["true", "false"] : spec.options;
    input = el("select", { id, name: spec.path },
      el("option", { value: "" }, spec.placeholder || "—"),
      options.map((o) => el("option", { value: String(o), selected: current !== undefined && String(current) === String(o) }, String(o))));
  } else if (spec.kind === "textarea" || spec.kind === "json" || spec.kind === "lines") {
    let text = "";
    if (current !== undefined) {
      if (spec.kind === "json") text = JSON.stringify(current, null, 2);
      else if (spec.kind === "lines") text = (current || []).join("\n");
      else text = String(current);
    }
    input = el("textarea", { id, name: spec.path, rows: spec.rows || (spec.kind === "textarea" ? 5 : 3),
      spellcheck: spec.kind === "textarea" ? "true" : "false", placeholder: spec.placeholder,
      class: spec.kind === "textarea" ? "prompt" : "code" });
    input.value = text;
  } else {
    const number = spec.kind === "number" || spec.kind === "integer";
    input = el("input", { id, name: spec.path, type: number ? "number" : "text", autocomplete: "off",
      step: spec.kind === "integer" ? "1" : (number ? "any" : undefined), min: spec.min, max: spec.max,
      placeholder: spec.placeholder, class: spec.mono ? "code" : undefined });
    input.value = current === undefined || current === null ? "" : String(current);
  }
  return input;
}

/** A side-panel field bound to a value: spec.apply(value) on every valid edit, a commit on change. */
export function field(spec) {
  const id = "f-" + spec.path.replace(/[^A-Za-z0-9_-]/g, "-");
  const input = fieldInput(spec, id);
  if (state.readOnly) input.disabled = true;
  const error = el("div", { class: "field-error", "data-error-for": spec.path, id: id + "-error" });
  const row = el("div", { class: "field", "data-path": spec.path },
    el("label", { for: id }, spec.label, spec.required ? el("span", { class: "req", title: "required" }, " *") : null),
    input, spec.help ? el("div", { class: "help" }, spec.help) : null, error);
  input.setAttribute("aria-describedby", id + "-error");

  const onInput = () => {
    const parsed = parseField(spec.kind, input.value);
    if (parsed.error) {
      state.parseErrors.add(spec.path);
      showFieldError(spec.path, parsed.error);
      return;
    }
    state.parseErrors.delete(spec.path);
    spec.apply(parsed.value);
    if (spec.check) spec.check(parsed.value);
    events.emit("panel:issues");
  };
  input.addEventListener(spec.kind === "select" || spec.kind === "bool" ? "change" : "input", onInput);
  input.addEventListener("change", () => { if (!state.parseErrors.has(spec.path)) commit(); });
  return row;
}

export function showFieldError(path, message) {
  const box = panel().querySelector(`[data-error-for="${CSS.escape(path)}"]`);
  if (!box) return false;
  box.textContent = message || "";
  // A section's error line (e.g. the whole config: a timer needs one of its fields) has no field row.
  const row = box.closest(".field");
  if (row) row.classList.toggle("invalid", Boolean(message));
  return true;
}

export function section(title, ...children) {
  return el("section", { class: "panel-section" }, el("h3", {}, title), ...children);
}

/** The field spec for one JSON Schema property (kind, options, limits, placeholder). */
export function propertySpec(key, prop, path) {
  const spec = { path, label: prop.title || key };
  if (prop.default !== undefined) spec.placeholder = `default: ${JSON.stringify(prop.default)}`;
  if (Array.isArray(prop.enum)) Object.assign(spec, { kind: "select", options: prop.enum,
    placeholder: prop.default !== undefined ? `— (default ${prop.default})` : "—" });
  else if (prop.type === "string") spec.kind = prop.format === "textarea" ? "textarea" : "text";
  else if (prop.type === "integer") Object.assign(spec, { kind: "integer", min: prop.minimum, max: prop.maximum });
  else if (prop.type === "number") Object.assign(spec, { kind: "number", min: prop.minimum, max: prop.maximum });
  else if (prop.type === "boolean") spec.kind = "bool";
  else if (prop.type === "array" && prop.items && prop.items.type === "string") {
    Object.assign(spec, { kind: "lines", help: "one per line", rows: 3 });
  } else {
    // Say what the JSON holds: the schema's description, and an example as the placeholder.
    Object.assign(spec, { kind: "json", help: (prop.description ? prop.description + ". " : "")
      + "JSON" + (prop.type ? ` (${prop.type === "array" ? "a list" : prop.type})` : "") });
    if (Array.isArray(prop.examples) && prop.examples.length) spec.placeholder = "e.g. " + JSON.stringify(prop.examples[0]);
  }
  if (spec.kind === "text" && /url|function|model/i.test(key)) spec.mono = true;
  return spec;
}

/** A form for a JSON Schema object's properties (the node type's config schema). */
export function schemaFields(schema, value, pathPrefix, apply) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  return Object.entries(props).map(([key, prop]) => field(Object.assign(propertySpec(key, prop, pathPrefix + "." + key),
    { required: required.has(key), value: value ? value[key] : undefined, apply: (v) => apply(key, v) })));
}
