// The event bus the editor's modules talk upward through (static/js/lib/bus.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createBus } from "../../static/js/lib/bus.js";

test("listeners run in order with the payload; emit says how many ran", () => {
  const bus = createBus(["changed"]);
  const seen = [];
  bus.on("changed", (p) => seen.push(["first", p]));
  bus.on("changed", (p) => seen.push(["second", p]));
  assert.equal(bus.emit("changed", { fromHistory: true }), 2);
  assert.deepEqual(seen, [["first", { fromHistory: true }], ["second", { fromHistory: true }]]);
});

test("on returns the way off; emitting with no listener is fine", () => {
  const bus = createBus(["a"]);
  let calls = 0;
  const off = bus.on("a", () => { calls += 1; });
  bus.emit("a");
  off();
  off(); // twice: no harm
  assert.equal(bus.emit("a"), 0);
  assert.equal(calls, 1);
  assert.equal(bus.count("a"), 0);
});

test("an undeclared event name throws, on emit and on listen", () => {
  const bus = createBus(["graph:changed"]);
  assert.throws(() => bus.emit("graph:chnaged"), /unknown event 'graph:chnaged'.*graph:changed/);
  assert.throws(() => bus.on("nope", () => {}), /unknown event 'nope'/);
  assert.throws(() => bus.on("graph:changed", "not a function"), TypeError);
});

test("a throwing listener does not stop the others; the first error is rethrown after", () => {
  const bus = createBus(["x"]);
  const seen = [];
  bus.on("x", () => { throw new Error("boom"); });
  bus.on("x", () => seen.push("ran"));
  assert.throws(() => bus.emit("x"), /boom/);
  assert.deepEqual(seen, ["ran"]);
});

test("a listener added while emitting acts from the next emit", () => {
  const bus = createBus(["x"]);
  const seen = [];
  bus.on("x", () => { seen.push("outer"); bus.on("x", () => seen.push("inner")); });
  bus.emit("x");
  assert.deepEqual(seen, ["outer"]);
  bus.emit("x");
  assert.deepEqual(seen, ["outer", "outer", "inner"]);
});
