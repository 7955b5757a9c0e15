// The Run dialog's form of a declared start input (static/js/editor/run-input.js), without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fieldPlaceholder, fieldText, inputFields, inputFromTexts, inputProblems, withDefaults }
  from "../../static/js/editor/run-input.js";

const schema = {
  type: "object", required: ["url"], additionalProperties: false,
  properties: {
    url: { type: "string", description: "Where to look", examples: ["https://example.com"] },
    depth: { type: "integer", default: 2, minimum: 1, maximum: 5 },
    mode: { enum: ["fast", 3], default: "fast" },
    strict: { type: "boolean" },
    options: { type: "object", properties: { lang: { type: "string", default: "en" } }, default: {} },
  },
};

test("one field per declared property, with its kind, description, default and example", () => {
  const fields = inputFields(schema);
  assert.deepEqual(fields.map((f) => [f.name, f.kind, f.required]), [["url", "text", true], ["depth", "integer", false],
    ["mode", "enum", false], ["strict", "bool", false], ["options", "json", false]]);
  assert.equal(fields[0].help, "Where to look");
  assert.equal(fieldPlaceholder(fields[0]), "e.g. https://example.com");
  assert.equal(fields[1].default, 2);
  assert.deepEqual(inputFields(null), []);
});

test("texts make the start input; empty fields are left out, bad text is named", () => {
  const fields = inputFields(schema);
  const { value, errors } = inputFromTexts(fields, { url: "https://x", depth: "3", mode: "3", strict: "false",
    options: "" }, { extra: 1 });
  assert.deepEqual(value, { extra: 1, url: "https://x", depth: 3, mode: 3, strict: false });
  assert.deepEqual(errors, {});
  assert.deepEqual(inputFromTexts(fields, { depth: "x", options: "{" }).errors.depth, "not a number");
  assert.match(inputFromTexts(fields, { options: "{" }).errors.options, /^not valid JSON/);
  // A value shown and read back is the same value.
  for (const [i, v] of [[1, 4], [2, "fast"], [2, 3], [3, true], [4, { lang: "fr" }]]) {
    const texts = { [fields[i].name]: fieldText(fields[i], v) };
    assert.deepEqual(inputFromTexts([fields[i]], texts).value, { [fields[i].name]: v });
  }
});

test("a required field left empty is an error, even one with a default", () => {
  const declared = { type: "object", required: ["ticket", "tier"],
    properties: { ticket: { type: "string" }, tier: { type: "string", default: "basic" }, note: { type: "string", default: "-" } } };
  const fields = inputFields(declared);
  const { value, errors } = inputFromTexts(fields, { ticket: "", tier: "", note: "" });
  assert.deepEqual(value, {});
  assert.deepEqual(errors, { ticket: "is required", tier: 'is required (it was cleared; its default is "basic")' });
  assert.deepEqual(inputFromTexts(fields, { ticket: "t", tier: "gold", note: "" }), { value: { ticket: "t", tier: "gold" }, errors: {} });
});

test("defaults fill absent fields, nested objects too, as the server does", () => {
  assert.deepEqual(withDefaults(schema, { url: "u" }), { url: "u", depth: 2, mode: "fast", options: { lang: "en" } });
  assert.deepEqual(withDefaults(schema, { url: "u", options: { lang: "de" }, depth: 4 }),
    { url: "u", depth: 4, mode: "fast", options: { lang: "de" } });
});

test("problems are named by field as the server names them", () => {
  assert.deepEqual(inputProblems(schema, { url: "u" }), {});
  assert.deepEqual(inputProblems(schema, { depth: 9, what: 1 }),
    { url: "is required", depth: "must be <= 5", what: "is not a declared input" });
  assert.deepEqual(inputProblems(schema, { url: 5 }), { url: "must be string" });
  assert.deepEqual(inputProblems(null, { anything: 1 }), {});
});
