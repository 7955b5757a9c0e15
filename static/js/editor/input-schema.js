/* The workflow's declared start input (the graph's `input`, a JSON Schema object; what the Run form
 * asks for), edited from the editor's Workflow panel: a summary row per field, adding and removing
 * fields. Pure: no DOM (tests/js/input-schema.test.mjs). Every function returns a new schema. */

import { ID_PATTERN } from "./model.js";

export const INPUT_TYPES = ["string", "number", "integer", "boolean", "array", "object"];

/** One row per declared field: {name, type, required, description, default}. */
export function inputSummary(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  return Object.entries(props).map(([name, prop]) => ({
    name, type: Array.isArray(prop.enum) ? "one of " + prop.enum.map((v) => JSON.stringify(v)).join(", ") : (prop.type || "any"),
    required: required.has(name), description: prop.description || "", default: prop.default,
  }));
}

/** The schema with a field added: {schema} or {error} naming the problem. */
export function addInputField(schema, name, type, required, description) {
  const key = (name || "").trim();
  if (!ID_PATTERN.test(key)) return { error: "a field name starts with a letter or _ and holds only letters, digits, _ and -" };
  if (!INPUT_TYPES.includes(type)) return { error: `the type must be one of ${INPUT_TYPES.join(", ")}` };
  const out = schema ? JSON.parse(JSON.stringify(schema)) : { type: "object" };
  out.type = "object";
  out.properties = out.properties || {};
  if (out.properties[key]) return { error: `there is already an input field '${key}'` };
  out.properties[key] = description ? { type, description } : { type };
  if (required) out.required = [...(out.required || []), key];
  return { schema: out };
}

/** The schema without field `name` (undefined when no field is left: no declared input). */
export function removeInputField(schema, name) {
  const out = JSON.parse(JSON.stringify(schema || {}));
  if (out.properties) delete out.properties[name];
  if (out.required) {
    out.required = out.required.filter((r) => r !== name);
    if (!out.required.length) delete out.required;
  }
  const fieldsLeft = out.properties && Object.keys(out.properties).length;
  if (!fieldsLeft) delete out.properties;
  return Object.keys(out).some((k) => k !== "type") ? out : undefined;
}
