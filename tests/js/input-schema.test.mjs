// The Workflow panel's editing of a declared start input (static/js/editor/input-schema.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { addInputField, inputSummary, removeInputField } from "../../static/js/editor/input-schema.js";

test("a summary row per declared field, with its type and whether it is required", () => {
  const schema = { type: "object", required: ["ticket"],
    properties: { ticket: { type: "string", description: "the customer's text" }, tier: { enum: ["a", "b"], default: "a" } } };
  assert.deepEqual(inputSummary(schema).map((r) => [r.name, r.type, r.required]),
    [["ticket", "string", true], ["tier", 'one of "a", "b"', false]]);
  assert.deepEqual(inputSummary(undefined), []);
});

test("adding fields builds the schema; bad names and duplicates are refused", () => {
  let { schema } = addInputField(undefined, "ticket", "string", true, "the text");
  assert.deepEqual(schema, { type: "object", properties: { ticket: { type: "string", description: "the text" } },
    required: ["ticket"] });
  ({ schema } = addInputField(schema, "priority", "integer", false));
  assert.deepEqual(Object.keys(schema.properties), ["ticket", "priority"]);
  assert.deepEqual(schema.required, ["ticket"]);
  assert.match(addInputField(schema, "ticket", "string").error, /already/);
  assert.match(addInputField(schema, "2x", "string").error, /field name/);
  assert.match(addInputField(schema, "x", "date").error, /type/);
});

test("removing the last field leaves no declared input", () => {
  const { schema } = addInputField(undefined, "ticket", "string", true);
  const { schema: two } = addInputField(schema, "n", "number", false);
  assert.deepEqual(removeInputField(two, "ticket"), { type: "object", properties: { n: { type: "number" } } });
  assert.equal(removeInputField(schema, "ticket"), undefined);
  assert.deepEqual(removeInputField({ type: "object", title: "T", properties: { a: {} } }, "a"), { type: "object", title: "T" });
});
