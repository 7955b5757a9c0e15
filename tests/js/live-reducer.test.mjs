// The live view's model (static/js/live/reducer.js): state as a pure function of the event log.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createReducer, EventLog, EVENT_FILTERS, nodeStates, transitions } from "../../static/js/live/reducer.js";
import { serverTables } from "./server-tables.mjs";

const tables = serverTables();
const reducer = createReducer(tables, ["start", "fetch", "classify", "reply", "end"]);
let seq = 0;
const ev = (type, node, payload) => ({ seq: ++seq, type, node: node || "", payload: payload || {} });

test("every event kind the server maps moves a node or the instance to a status the server knows", () => {
  const statuses = new Set([...tables.stepStatuses, ...tables.instanceStatuses]);
  for (const [kind, status] of Object.entries(tables.nodeStateByEvent)) {
    assert.ok(tables.eventKinds.includes(kind), kind);
    assert.ok(statuses.has(status), `${kind} -> ${status}`);
    const state = reducer.apply(reducer.empty(), ev(kind, "fetch", { visit: 1 }));
    assert.equal(state.nodes.fetch.state, status, kind);
  }
  for (const [kind, status] of Object.entries(tables.instanceStatusByEvent)) {
    assert.equal(reducer.apply(reducer.empty("running"), ev(kind)).status, status, kind);
  }
});

test("a step's fired edges count from its step_succeeded event, and from an older log's edges_taken", () => {
  const folded = reducer.replay([
    ev("instance_started"), ev("step_started", "fetch", { visit: 1 }),
    ev("step_succeeded", "fetch", { visit: 1, edges: [1, 2] }), ev("step_started", "fetch", { visit: 2 }),
    ev("step_succeeded", "fetch", { visit: 2, edges: [2] }),
  ]);
  assert.deepEqual(folded.edges, { 1: 1, 2: 2 });
  const older = reducer.replay([ev("step_succeeded", "fetch", { visit: 1 }), ev("edges_taken", "fetch", { edges: [1] })]);
  assert.deepEqual(older.edges, { 1: 1 });
  assert.ok(EVENT_FILTERS.edge(ev("step_succeeded", "fetch", { edges: [1] })));
  assert.ok(!EVENT_FILTERS.edge(ev("step_succeeded", "end", { structural: true })));
});

test("a step's life: queued, running, retrying, succeeded, with its visits counted", () => {
  const events = [
    ev("instance_started"), ev("step_queued", "fetch", { visit: 1 }), ev("step_started", "fetch", { visit: 1 }),
    ev("step_retrying", "fetch", { visit: 1, attempt: 1 }), ev("step_started", "fetch", { visit: 1, attempt: 2 }),
    ev("step_succeeded", "fetch", { visit: 1 }), ev("edges_taken", "fetch", { edges: [1, 2] }),
    ev("step_queued", "fetch", { visit: 2 }),
  ];
  const state = reducer.replay(events);
  assert.equal(state.status, "running");
  assert.deepEqual(state.nodes.fetch, { state: "queued", visits: 2 });
  assert.deepEqual(state.edges, { 1: 1, 2: 1 });
  assert.equal(state.seq, events.at(-1).seq);
  // Time travel: the state after the first five events.
  assert.deepEqual(reducer.replay(events, 5).nodes.fetch, { state: "running", visits: 1 });
  assert.deepEqual(reducer.replay(events, 0), reducer.empty());
});

test("compensation steps colour their node compensating, then compensated; their success is not shown", () => {
  const p = tables.compensatePrefix;
  const state = reducer.replay([
    ev("step_succeeded", "reply", { visit: 1 }), ev("compensation_started"),
    ev("step_queued", p + "reply"), ev("step_started", p + "reply"),
  ]);
  assert.equal(state.status, "compensating");
  assert.equal(state.nodes.reply.state, "compensating");
  assert.equal(state.nodes.reply.visits, 1);
  reducer.apply(state, ev("step_succeeded", p + "reply"));
  assert.equal(state.nodes.reply.state, "compensating");
  reducer.apply(state, ev("step_compensated", "reply"));
  reducer.apply(state, ev("instance_compensated"));
  assert.equal(state.nodes.reply.state, "compensated");
  assert.ok(reducer.isFinal(state.status));
  assert.equal(reducer.apply(reducer.empty(), ev("step_failed", p + "fetch")).nodes.fetch.state, "failed");
  assert.equal(reducer.baseNode(p + "fetch"), "fetch");
});

test("a halt marks the node it stopped at and parks the rest; a decision clears the review item", () => {
  const state = reducer.replay([
    ev("step_queued", "reply", { visit: 1 }),
    ev("instance_halted", "", { reason: "loop_breaker", review: 7, parked: ["reply"],
      details: { next: ["classify", "nowhere"], message: "too many transitions" } }),
  ]);
  assert.equal(state.status, "halted");
  assert.equal(state.nodes.reply.state, "pending");
  assert.equal(state.nodes.classify.state, "halted");
  assert.equal(state.nodes.nowhere, undefined); // not a node of the graph
  assert.deepEqual(state.review, { id: 7, reason: "loop_breaker", details: { next: ["classify", "nowhere"],
    message: "too many transitions" } });
  reducer.apply(state, ev("review_decided", "", { action: "approve" }));
  assert.equal(state.review, null);
  const resumed = reducer.apply(reducer.replay([ev("instance_halted", "", { details: { node: "fetch" } })]),
    ev("instance_resumed", "", { compensation: true }));
  assert.equal(resumed.status, "compensating");
  assert.equal(resumed.review, null);
});

test("a payload's own status wins over the table", () => {
  assert.equal(reducer.apply(reducer.empty(), ev("instance_resumed", "", { status: "waiting" })).status, "waiting");
});

test("transitions lists each node whose state changed", () => {
  const state = reducer.empty();
  const before = nodeStates(state);
  reducer.apply(state, ev("step_started", "fetch"));
  assert.deepEqual(transitions(before, nodeStates(state)), [{ node: "fetch", from: null, state: "running" }]);
  assert.deepEqual(transitions(nodeStates(state), nodeStates(state)), []);
});

test("the event log applies events once, in sequence order, and reports a gap", () => {
  const log = new EventLog();
  const e = (n) => ({ seq: n, type: "step_queued", node: "fetch" });
  assert.deepEqual(log.add([e(2), e(3)]), []);
  assert.ok(log.gap);
  assert.deepEqual(log.add([e(1), e(2)]).map((x) => x.seq), [1, 2, 3]);
  assert.equal(log.gap, false);
  assert.deepEqual(log.add([e(3), e(1)]), []); // duplicates: already applied
  assert.equal(log.lastSeq, 3);
  assert.equal(log.events.length, 3);
});

test("timeline filters classify events by kind", () => {
  assert.ok(EVENT_FILTERS.step({ type: "step_failed" }));
  assert.ok(EVENT_FILTERS.problem({ type: "step_failed" }));
  assert.ok(EVENT_FILTERS.edge({ type: "node_skipped" }));
  assert.ok(EVENT_FILTERS.review({ type: "review_decided" }));
  assert.equal(EVENT_FILTERS.instance({ type: "step_started" }), false);
});

test("a human task opened makes a running instance wait, with its item; the decision clears the item", () => {
  const state = reducer.empty("running");
  reducer.apply(state, ev("step_queued", "reply", { visit: 1 }));
  reducer.apply(state, ev("human_task_opened", "reply", { review: 42, prompt: "Send it?" }));
  assert.equal(state.status, "waiting");
  assert.deepEqual(state.review, { id: 42, reason: "human_task", node: "reply", details: { prompt: "Send it?" } });
  reducer.apply(state, ev("review_decided", "reply", { review: 42, action: "approve" }));
  assert.equal(state.review, null);
  // A halted instance stays halted when a task opens meanwhile.
  const halted = reducer.empty("halted");
  reducer.apply(halted, ev("human_task_opened", "reply", { review: 43 }));
  assert.equal(halted.status, "halted");
});

test("a streaming step's partial reply shows while it runs and goes when the attempt ends", () => {
  const state = reducer.replay([ev("instance_started"), ev("step_queued", "classify", { visit: 1 }),
    ev("step_started", "classify", { visit: 1 })]);
  const before = JSON.stringify(state.nodes);
  const seqBefore = state.seq;
  assert.equal(reducer.applyPartial(state, { node: "classify", step: 4, text: "Hel", chars: 3 }), true);
  assert.equal(reducer.applyPartial(state, { node: "classify", step: 4, text: "Hello", chars: 5 }), true);
  // An older message arriving late does not shrink the text.
  assert.equal(reducer.applyPartial(state, { node: "classify", step: 4, text: "He", chars: 2 }), false);
  assert.deepEqual(state.partials.classify, { step: 4, text: "Hello", chars: 5 });
  assert.equal(JSON.stringify(state.nodes), before, "a partial reply is not an event: no node moves");
  assert.equal(state.seq, seqBefore);
  reducer.apply(state, ev("step_succeeded", "classify", { visit: 1 }));
  assert.equal(state.partials.classify, undefined);
  // A message sent before the commit but heard after it is ignored.
  assert.equal(reducer.applyPartial(state, { node: "classify", step: 4, text: "Hello w", chars: 7 }), false);
  assert.equal(state.partials.classify, undefined);
  // A retry drops the failed attempt's text; the next attempt streams afresh.
  reducer.apply(state, ev("step_queued", "reply", { visit: 1 }));
  reducer.applyPartial(state, { node: "reply", step: 5, text: "Dear", chars: 4 });
  reducer.apply(state, ev("step_retrying", "reply", { visit: 1, attempt: 1 }));
  assert.equal(state.partials.reply, undefined);
  assert.equal(reducer.applyPartial(state, { node: "reply", step: 5, text: "x" }), false);
  assert.equal(reducer.applyPartial(state, { text: 3 }), false);
});
