// The save conflict as the save dialog shows it (static/js/editor/conflict.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { conflictView, stamp } from "../../static/js/editor/conflict.js";

const diff = (over) => Object.assign({
  nodes: { added: [], removed: [], changed: [], moved: [] },
  edges: { added: [], removed: [], changed: [] }, settings: {},
}, over);

test("who saved, when, with what message, and both sides' changes", () => {
  const view = conflictView({
    latest: { number: 3, created_by: "bob", created_at: "2026-12-01T15:04:05.123456+00:00", message: "faster" },
    their_changes: diff({ nodes: { added: ["notify"], removed: [], changed: [{ id: "ask", fields: ["config"] }], moved: [] } }),
    your_changes: diff({ edges: { added: [{ source: "a", target: "b", when: null }], removed: [], changed: [] } }),
  }, 2);
  assert.equal(view.headline, "v3 was saved by bob at 2026-12-01 15:04:05 UTC (you started from v2).");
  assert.equal(view.message, "faster");
  assert.ok(view.theirsKnown);
  assert.deepEqual(view.theirs, [["added", "node", "notify"], ["changed", "node", "ask (config)"]]);
  assert.deepEqual(view.yours, [["added", "edge", "a → b"]]);
});

test("a conflict without the base version's diff or an author still says what it can", () => {
  const view = conflictView({ latest: { number: 1, created_by: null, created_at: "2026-01-02T03:04:05Z", message: "" },
    their_changes: null, your_changes: diff({}) }, null);
  assert.equal(view.headline, "v1 was saved at 2026-01-02 03:04:05 UTC.");
  assert.equal(view.theirsKnown, false);
  assert.deepEqual(view.theirs, []);
  assert.equal(conflictView({ latest: null }, 1).headline, "Another version was saved meanwhile.");
  assert.equal(stamp("nonsense"), "nonsense");
});
