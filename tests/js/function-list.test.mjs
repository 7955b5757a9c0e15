// The function picker's list (static/js/editor/function-list.js): filtering and the named function.
import { test } from "node:test";
import assert from "node:assert/strict";
import { filterFunctions, functionNamed, summary } from "../../static/js/editor/function-list.js";

const FUNCTIONS = [
  { name: "reserve_funds", doc: "Reserve the amount on the ledger.\nIdempotent by request id." },
  { name: "classify_ticket", doc: "Pick a route for a support ticket." },
  { name: "refund", doc: "Pay the refund; compensated by release_funds." },
  { name: "release_funds", doc: "" },
];

test("every function without a query, sorted by name", () => {
  assert.deepEqual(filterFunctions(FUNCTIONS, "").map((f) => f.name),
    ["classify_ticket", "refund", "release_funds", "reserve_funds"]);
});

test("name prefixes first, then names containing the words, then docstrings", () => {
  assert.deepEqual(filterFunctions(FUNCTIONS, "re").map((f) => f.name),
    ["refund", "release_funds", "reserve_funds"]);
  assert.deepEqual(filterFunctions(FUNCTIONS, "funds").map((f) => f.name),
    ["release_funds", "reserve_funds", "refund"]);
  assert.deepEqual(filterFunctions(FUNCTIONS, "TICKET route").map((f) => f.name), ["classify_ticket"]);
  assert.deepEqual(filterFunctions(FUNCTIONS, "nothing like it"), []);
});

test("the function a value names: a name, or a python compensation action", () => {
  assert.equal(functionNamed("refund"), "refund");
  assert.equal(functionNamed({ type: "python", config: { function: "release_funds" } }), "release_funds");
  assert.equal(functionNamed({ type: "http", config: { url: "x" } }), null);
  assert.equal(functionNamed(undefined), null);
});

test("a docstring's summary is its first line", () => {
  assert.equal(summary(FUNCTIONS[0].doc), "Reserve the amount on the ledger.");
  assert.equal(summary(""), "(no docstring)");
});
