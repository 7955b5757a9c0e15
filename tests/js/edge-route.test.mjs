// Edges that would cross a node bend around it (static/js/lib/edge-route.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { bendFor, segmentHitsBox } from "../../static/js/lib/edge-route.js";

const box = (x, y) => ({ x, y, w: 150, h: 50 });

test("a segment through a box hits it; one beside it or ending before it does not", () => {
  assert.ok(segmentHitsBox({ x: 0, y: 0 }, { x: 400, y: 0 }, box(200, 10), 0));
  assert.ok(!segmentHitsBox({ x: 0, y: 0 }, { x: 400, y: 0 }, box(200, 80), 0));
  assert.ok(!segmentHitsBox({ x: 0, y: 0 }, { x: 100, y: 0 }, box(200, 0), 0));
  assert.ok(segmentHitsBox({ x: 0, y: 0 }, { x: 400, y: 400 }, box(200, 200), 0));
});

test("no box in the way: no bend", () => {
  assert.equal(bendFor({ x: 0, y: 0 }, { x: 400, y: 0 }, [box(200, 100)]), 0);
  assert.equal(bendFor({ x: 0, y: 0 }, { x: 0, y: 0 }, [box(0, 0)]), 0);
});

test("a box on the line: the curve clears it, on the side away from its centre", () => {
  const p = { x: 0, y: 0 };
  const q = { x: 400, y: 0 };
  const down = bendFor(p, q, [box(200, -10)]); // the box sits a little above (negative y)
  const up = bendFor(p, q, [box(200, 10)]);
  assert.ok(down * up < 0, "the bends go opposite ways");
  // At the middle the curve is d/2 from the line: clear of the box's half height (25) and the margin.
  assert.ok(Math.abs(down) / 2 >= 25 - 10 + 22, `bend ${down} does not clear the box`);
  const t = (d) => ({ x: 200, y: (d / 2) * 1 });
  // The curve's middle, with the normal of p->q being (0, 1), is outside the box grown by the margin.
  assert.ok(!segmentHitsBox(t(down), t(down), box(200, -10), 10));
});

test("a bend never goes further than its limit", () => {
  const d = bendFor({ x: 0, y: 0 }, { x: 400, y: 0 }, [{ x: 10, y: 0, w: 150, h: 3000 }]);
  assert.equal(Math.abs(d), 600);
});

test("the layer gap grows with the longest edge label, never shrinks what was asked", async () => {
  const { labelRoom, withLabelRoom, edgeLabel, EDGE_LABEL_MOST } = await import("../../static/js/lib/graph.js");
  const graph = { edges: [{ source: "a", target: "b" }, { source: "a", target: "c", when: "route == 'smalltalk'" }] };
  assert.equal(labelRoom({ edges: [{ source: "a", target: "b" }] }, "LR"), 0);
  const lr = labelRoom(graph, "LR");
  assert.ok(lr > "route == 'smalltalk'".length * 6, `LR room ${lr}`);
  assert.ok(labelRoom(graph, "TB") < lr);
  assert.equal(withLabelRoom({ name: "dagre", rankDir: "LR", rankSep: 45 }, graph).rankSep, lr);
  assert.equal(withLabelRoom({ name: "dagre", rankDir: "LR", rankSep: 999 }, graph).rankSep, 999);
  assert.deepEqual(withLabelRoom({ name: "preset" }, graph), { name: "preset" });
  const long = edgeLabel({ when: "x".repeat(200) });
  assert.equal(long.length, EDGE_LABEL_MOST);
  assert.ok(long.endsWith("…"));
});
