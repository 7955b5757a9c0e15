// Keyboard travel over a graph's nodes (static/js/lib/node-order.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readingOrder, stepFrom } from "../../static/js/lib/node-order.js";

test("nodes in reading order: columns left to right, top to bottom within a column", () => {
  const ids = readingOrder([{ id: "end", x: 600, y: 0 }, { id: "b", x: 300, y: 80 }, { id: "a", x: 310, y: -80 },
    { id: "start", x: 0, y: 0 }]);
  assert.deepEqual(ids, ["start", "a", "b", "end"]);
});

test("next and previous wrap around; none selected starts at an end", () => {
  const ids = ["start", "a", "end"];
  assert.equal(stepFrom(ids, "start", 1), "a");
  assert.equal(stepFrom(ids, "end", 1), "start");
  assert.equal(stepFrom(ids, "start", -1), "end");
  assert.equal(stepFrom(ids, null, 1), "start");
  assert.equal(stepFrom(ids, null, -1), "end");
  assert.equal(stepFrom([], null, 1), null);
});
