/* The Run dialog's form, pure: the fields of a workflow's declared start input (the graph's `input`,
 * a JSON Schema object: properties with type, description, default, examples; required), the text
 * each field shows, the start input a filled form makes, and what is wrong with it, named by field
 * as the server names them (`amount`, `address.city`). No DOM (tests/js/run-input.test.mjs). */

import { compile } from "../lib/schema-check.js";
import { errorsByPath, parseField } from "./model.js";

/** One field spec per declared property, in declaration order. */
export function inputFields(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  return Object.entries(props).map(([name, prop]) => {
    const spec = { name, label: prop.title || name, required: required.has(name), help: prop.description || "",
      default: prop.default, examples: Array.isArray(prop.examples) ? prop.examples : [] };
    if (Array.isArray(prop.enum)) Object.assign(spec, { kind: "enum", options: prop.enum });
    else if (prop.type === "string") spec.kind = prop.format === "textarea" || (prop.maxLength || 0) > 200 ? "textarea" : "text";
    else if (prop.type === "integer" || prop.type === "number") Object.assign(spec, { kind: prop.type, min: prop.minimum, max: prop.maximum });
    else if (prop.type === "boolean") spec.kind = "bool";
    else spec.kind = "json";
    return spec;
  });
}

/** The text a field shows for a value (undefined: empty). Enum options are written as JSON. */
export function fieldText(spec, value) {
  if (value === undefined || (value === null && spec.kind !== "json" && spec.kind !== "enum")) return "";
  if (spec.kind === "enum") return JSON.stringify(value);
  if (spec.kind === "json") return JSON.stringify(value, null, 2);
  if (spec.kind === "bool") return value ? "true" : "false";
  return String(value);
}

/** A placeholder from the first example. */
export function fieldPlaceholder(spec) {
  if (!spec.examples.length) return "";
  const e = spec.examples[0];
  return "e.g. " + (typeof e === "string" ? e : JSON.stringify(e));
}

/** The start input the texts make ({name: text}); optional fields left empty are left out (the
 * server then fills its default), a required one left empty is an error even when it has a default. {value, errors: {name: message}} where errors are texts that do not parse. */
export function inputFromTexts(specs, texts, base) {
  const value = Object.assign({}, base || {});
  const errors = {};
  specs.forEach((spec) => {
    const raw = texts[spec.name] === undefined ? "" : texts[spec.name];
    delete value[spec.name];
    let parsed;
    if (spec.kind === "enum") {
      parsed = raw === "" ? { value: undefined } : { value: JSON.parse(raw) };
    } else {
      parsed = parseField(spec.kind === "integer" || spec.kind === "number" ? "number" : spec.kind, raw);
    }
    if (parsed.error) errors[spec.name] = parsed.error;
    else if (parsed.value !== undefined) value[spec.name] = parsed.value;
    // A required field the designer emptied is a mistake to point at, not a cue to send its default.
    else if (spec.required) errors[spec.name] = spec.default !== undefined
      ? `is required (it was cleared; its default is ${JSON.stringify(spec.default)})` : "is required";
  });
  return { value, errors };
}

/** `data` with every absent field that declares a default filled in, nested objects too (as the server does). */
export function withDefaults(schema, data) {
  if (!schema) return Object.assign({}, data);
  const out = Object.assign({}, data);
  Object.entries(schema.properties || {}).forEach(([name, field]) => {
    if (!(name in out) && field.default !== undefined) out[name] = JSON.parse(JSON.stringify(field.default));
    if (out[name] && typeof out[name] === "object" && !Array.isArray(out[name]) && field.properties) {
      out[name] = withDefaults(field, out[name]);
    }
  });
  return out;
}

const validators = new WeakMap();

/** What is wrong with a start input by the declared schema, after defaults: {field: message}
 * ("" for the whole input). The server's check stays the authority. */
export function inputProblems(schema, data) {
  if (!schema) return {};
  if (!validators.has(schema)) validators.set(schema, compile(schema));
  const validate = validators.get(schema);
  if (validate(withDefaults(schema, data))) return {};
  const out = errorsByPath(validate.errors, "");
  Object.keys(out).forEach((k) => {
    if (out[k] === "required") out[k] = "is required";
    else if (out[k] === "not a known setting") out[k] = "is not a declared input";
  });
  return out;
}
