import { test } from "node:test";
import assert from "node:assert/strict";
import { toolsOf, withTool } from "../../static/js/editor/mcp-list.js";

const offered = { name: "order_status", description: "status", parameters: { type: "object", required: ["id"] },
  target: { type: "mcp", server: "orders", tool: "order_status" } };

test("the field's text as a list of tools", () => {
  assert.deepEqual(toolsOf(""), []);
  assert.deepEqual(toolsOf("  "), []);
  assert.deepEqual(toolsOf('[{"name": "a"}]'), [{ name: "a" }]);
  assert.equal(toolsOf("{not json"), null);
  assert.equal(toolsOf('{"name": "a"}'), null);
});

test("a picked tool is appended as an llm tool with its target", () => {
  const python = { name: "lookup", target: { type: "python", function: "examples.lookup" } };
  assert.deepEqual(withTool([python], offered), [python, { name: "order_status", description: "status",
    parameters: { type: "object", required: ["id"] }, target: { type: "mcp", server: "orders", tool: "order_status" } }]);
});

test("picking a tool of the same name again replaces it in place", () => {
  const first = withTool([], offered);
  const again = withTool([{ name: "x" }, ...first], { ...offered, description: "newer" });
  assert.deepEqual(again.map((t) => [t.name, t.description]), [["x", undefined], ["order_status", "newer"]]);
});
