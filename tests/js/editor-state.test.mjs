// The editor's state (static/js/editor/state.js): made from the page's config; dirty only when editable.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EVENTS, createState, dirty } from "../../static/js/editor/state.js";
import { History } from "../../static/js/editor/model.js";
import { createBus } from "../../static/js/lib/bus.js";

const cfg = { readOnly: false, version: 3, latest: 4, name: "Triage", description: null };

test("a state from the config: what is shown, nothing loaded yet", () => {
  const s = createState(cfg);
  assert.equal(s.version, 3);
  assert.equal(s.latest, 4);
  assert.equal(s.name, "Triage");
  assert.equal(s.description, "");
  assert.equal(s.readOnly, false);
  assert.deepEqual([s.types, s.typeOrder, s.settings, s.extras, s.issues], [{}, [], {}, {}, []]);
  assert.equal(s.history, null);
  assert.ok(s.parseErrors instanceof Set);
});

test("two states share nothing", () => {
  const a = createState(cfg);
  const b = createState(cfg);
  a.parseErrors.add("config.args");
  a.settings.ttl_s = 5;
  assert.equal(b.parseErrors.size, 0);
  assert.deepEqual(b.settings, {});
});

test("dirty: an editable canvas away from its saved snapshot; never before the history or read-only", () => {
  const s = createState(cfg);
  assert.equal(dirty(s), false);
  s.history = new History("v1");
  assert.equal(dirty(s), false);
  s.history.push("v1 edited");
  assert.equal(dirty(s), true);
  s.readOnly = true;
  assert.equal(dirty(s), false);
});

test("the declared events make a bus the editor's modules can emit on", () => {
  const bus = createBus(EVENTS);
  ["graph:changed", "panel:render", "panel:issues", "version:restore"].forEach((name) => assert.equal(bus.emit(name), 0));
  assert.throws(() => bus.emit("panel:rerender"), /unknown event/);
});
