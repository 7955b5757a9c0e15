// Where nodes go (static/js/lib/arrange.js): the layered layout, the readable viewport, a new node's spot.
import { test } from "node:test";
import assert from "node:assert/strict";
import { boundsOf, freeSpot, layered, overlaps, segmentHitsBox, viewportFor } from "../../static/js/lib/arrange.js";

const box = (id, type) => ({ id, w: type === "start" || type === "end" ? 110 : 150, h: 50, last: type === "end" });
// A support-ticket triage flow: classify, route, then a lookup or a direct answer, both to end.
const TRIAGE = {
  nodes: [box("start", "start"), box("classify"), box("route"), box("lookup"), box("answer"), box("end", "end")],
  edges: [{ source: "start", target: "classify" }, { source: "classify", target: "route" },
    { source: "route", target: "lookup", room: 160 }, { source: "route", target: "answer", room: 160 },
    { source: "lookup", target: "end" }, { source: "answer", target: "end" }],
};
const placed = (graph, pos) => graph.nodes.map((n) => ({ ...n, x: pos[n.id].x, y: pos[n.id].y }));

function assertNoOverlap(boxes, margin) {
  for (let i = 0; i < boxes.length; i += 1) {
    for (let j = i + 1; j < boxes.length; j += 1) {
      assert.ok(!overlaps(boxes[i], boxes[j], margin), `${boxes[i].id} overlaps ${boxes[j].id}`);
    }
  }
}

test("layered LR: every edge points right, one column per layer, branches side by side", () => {
  const pos = layered(TRIAGE.nodes, TRIAGE.edges, { direction: "LR", rankSep: 50, nodeSep: 40 });
  TRIAGE.edges.forEach((e) => assert.ok(pos[e.target].x > pos[e.source].x, `${e.source} -> ${e.target}`));
  assert.equal(pos.lookup.x, pos.answer.x);
  assert.notEqual(pos.lookup.y, pos.answer.y);
  // The chain before the branch is one straight line, and the branch is centred on it.
  assert.equal(pos.start.y, pos.classify.y);
  assert.equal(pos.classify.y, pos.route.y);
  assert.equal((pos.lookup.y + pos.answer.y) / 2, pos.route.y);
  assertNoOverlap(placed(TRIAGE, pos), 39);
});

test("layered: only the gap a label sits in widens for it", () => {
  const pos = layered(TRIAGE.nodes, TRIAGE.edges, { rankSep: 50, nodeSep: 40 });
  const gap = (a, b) => pos[b].x - pos[a].x;
  assert.equal(gap("start", "classify"), 55 + 50 + 75);
  assert.equal(gap("classify", "route"), 75 + 50 + 75);
  assert.equal(gap("route", "lookup"), 75 + 160 + 75);
  assert.equal(gap("lookup", "end"), 75 + 50 + 55);
});

test("layered TB: layers top to bottom", () => {
  const pos = layered(TRIAGE.nodes, TRIAGE.edges, { direction: "TB", rankSep: 50, nodeSep: 40 });
  TRIAGE.edges.forEach((e) => assert.ok(pos[e.target].y > pos[e.source].y, `${e.source} -> ${e.target}`));
  assert.equal(pos.lookup.y, pos.answer.y);
  assert.ok(Math.abs(pos.lookup.x - pos.answer.x) >= 150 + 40);
  assertNoOverlap(placed(TRIAGE, pos), 39);
});

test("layered: a loop's way back does not reorder the flow, end nodes come last, strays are placed", () => {
  const nodes = [box("start", "start"), box("think"), box("tool"), box("end", "end"), box("stray")];
  const edges = [{ source: "start", target: "think" }, { source: "think", target: "tool" },
    { source: "tool", target: "think", when: "again" }, { source: "think", target: "end" }];
  const pos = layered(nodes, edges);
  assert.ok(pos.start.x < pos.think.x && pos.think.x < pos.tool.x && pos.tool.x < pos.end.x);
  assert.ok(pos.stray);
  assertNoOverlap(nodes.map((n) => ({ ...n, ...pos[n.id] })), 0);
  // A new workflow's start and end, unconnected: side by side, the end to the right.
  const two = layered([box("start", "start"), box("end", "end")], []);
  assert.ok(two.end.x > two.start.x);
  assert.equal(two.end.y, two.start.y);
});

test("layered: a wide fan-out keeps its nodes apart and is deterministic", () => {
  const nodes = [box("start", "start"), ...Array.from({ length: 7 }, (_, i) => box("n" + i)), box("end", "end")];
  const edges = nodes.slice(1, 8).flatMap((n) => [{ source: "start", target: n.id }, { source: n.id, target: "end" }]);
  const pos = layered(nodes, edges, { nodeSep: 30 });
  assertNoOverlap(nodes.map((n) => ({ ...n, ...pos[n.id] })), 29);
  assert.deepEqual(layered(nodes, edges, { nodeSep: 30 }), pos);
  assert.deepEqual(layered([], []), {});
});

test("viewport: a graph that fits is centred whole, never blown up past maxZoom", () => {
  const small = boundsOf([{ x: 0, y: 0, w: 110, h: 50 }, { x: 300, y: 0, w: 110, h: 50 }]);
  const v = viewportFor(small, 900, 700, { padding: 24, minZoom: 0.85, maxZoom: 1.2 });
  assert.equal(v.zoom, 1.2);
  const left = small.x1 * v.zoom + v.pan.x;
  const right = small.x2 * v.zoom + v.pan.x;
  assert.ok(Math.abs(left - (900 - right)) < 1e-9, "centred across");
  const wide = { x1: 0, y1: 0, x2: 1000, y2: 100, w: 1000, h: 100 };
  const w = viewportFor(wide, 900, 700, { padding: 24, minZoom: 0.85, maxZoom: 1.2 });
  assert.ok(Math.abs(w.zoom - 852 / 1000) < 1e-9, "as large as fits, above the readable minimum");
  assert.ok(Math.abs(w.pan.x - 24) < 1e-9);
});

test("viewport: too big to read whole -> readable zoom, shown from its start, centred where it fits", () => {
  const huge = { x1: -100, y1: -50, x2: 2900, y2: 150, w: 3000, h: 200 };
  const v = viewportFor(huge, 900, 700, { padding: 24, minZoom: 0.85, maxZoom: 1.2 });
  assert.equal(v.zoom, 0.85);
  assert.ok(Math.abs(huge.x1 * v.zoom + v.pan.x - 24) < 1e-9, "its left edge at the padding");
  const top = huge.y1 * v.zoom + v.pan.y;
  const bottom = huge.y2 * v.zoom + v.pan.y;
  assert.ok(Math.abs(top - (700 - bottom)) < 1e-9, "centred down");
  assert.deepEqual(viewportFor(null, 800, 600), { zoom: 1, pan: { x: 400, y: 300 } });
});

test("segments and boxes", () => {
  const b = { x: 0, y: 0, w: 100, h: 40 };
  assert.equal(segmentHitsBox({ x: -200, y: 0 }, { x: 200, y: 0 }, b), true);
  assert.equal(segmentHitsBox({ x: -200, y: 30 }, { x: 200, y: 30 }, b), false);
  assert.equal(segmentHitsBox({ x: -200, y: -200 }, { x: 200, y: 200 }, b), true);
  assert.equal(segmentHitsBox({ x: 60, y: -100 }, { x: 60, y: 100 }, b), false);
  assert.equal(overlaps(b, { x: 95, y: 0, w: 100, h: 40 }), true);
  assert.equal(overlaps(b, { x: 105, y: 0, w: 100, h: 40 }), false);
  assert.equal(overlaps(b, { x: 105, y: 0, w: 100, h: 40 }, 10), true);
  assert.equal(overlaps(b, { x: 95, y: 0, w: 100, h: 40 }, -10), false);
});

test("freeSpot: not on the edge between start and end, and three in a row never overlap", () => {
  const view = { x1: -300, y1: -300, x2: 700, y2: 300 };
  const boxes = [{ id: "start", x: 0, y: 0, w: 110, h: 50 }, { id: "end", x: 400, y: 0, w: 110, h: 50 }];
  const segments = [{ p: { x: 0, y: 0 }, q: { x: 400, y: 0 } }];
  const size = { w: 150, h: 50 };
  const added = [];
  for (let i = 0; i < 3; i += 1) {
    const near = added.length ? added[added.length - 1] : null;
    const p = freeSpot(size, [...boxes, ...added], segments, view, { gap: 30, near });
    const b = { id: "new" + i, ...size, ...p };
    assert.ok(!segments.some((s) => segmentHitsBox(s.p, s.q, b)), `new node ${i} sits on the edge`);
    assert.ok(p.x - 75 >= view.x1 && p.x + 75 <= view.x2 && p.y - 25 >= view.y1 && p.y + 25 <= view.y2, "in view");
    added.push(b);
  }
  assertNoOverlap([...boxes, ...added], 29);
});

test("freeSpot: right of the selected node when that is free, else another free spot near it", () => {
  const view = { x1: -500, y1: -400, x2: 900, y2: 400 };
  const sel = { id: "a", x: 0, y: 0, w: 150, h: 50 };
  const p = freeSpot({ w: 150, h: 50 }, [sel], [], view, { gap: 30, near: sel });
  assert.deepEqual(p, { x: 210, y: 0 });
  const blocker = { id: "b", x: 210, y: 0, w: 150, h: 50 };
  const q = freeSpot({ w: 150, h: 50 }, [sel, blocker], [{ p: sel, q: blocker }], view, { gap: 30, near: sel });
  assert.equal(q.x, 210);
  assert.notEqual(q.y, 0);
  assertNoOverlap([sel, blocker, { id: "new", w: 150, h: 50, ...q }], 29);
});

test("freeSpot: a full view falls back to the right of everything", () => {
  const view = { x1: -100, y1: -50, x2: 100, y2: 50 };
  const boxes = [{ id: "a", x: 0, y: 0, w: 200, h: 100 }];
  const p = freeSpot({ w: 150, h: 50 }, boxes, [], view, { gap: 30 });
  assert.ok(p.x - 75 >= 100 + 30);
  assert.ok(!overlaps({ ...p, w: 150, h: 50 }, boxes[0], 29));
});
