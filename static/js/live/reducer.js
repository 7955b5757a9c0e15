/* The live view's model, pure: an instance's picture is a function of its event log.
 *
 *   const reducer = createReducer(tables, graphNodeIds);   // tables: GET /api/meta (lib/meta.js)
 *   let state = reducer.empty("running");
 *   reducer.apply(state, event);                           // mutates and returns `state`
 *   reducer.replay(events, 12);                            // the state after the first 12 events
 *
 * state: {status, seq, review, nodes: {id: {state, visits}}, edges: {index: times taken},
 *         partials: {node id: {step, text, chars}}}.
 * `partials` are a streaming llm step's reply so far (socket `partial` messages, applied with
 * reducer.applyPartial; not events, never in the log): kept while the node is queued or running,
 * dropped by the event that ends the attempt (its output then shows in the inspector).
 * `status` is what the events imply; the page lets the server's status win once it has applied as many
 * events as the server had written (live/actions.js), as some changes (a human task answered while
 * another still waits) are not spelled out by one event.
 * No DOM, no clock: the same function serves live updates, time travel and the unit tests
 * (tests/js/live-reducer.test.mjs).
 */

// Node states in which a step's partial reply is shown (null: its step_started has not arrived yet).
const STREAMING = new Set([null, "queued", "running"]);

export function createReducer(tables, graphNodeIds) {
  const nodeState = tables.nodeStateByEvent;
  const instanceStatus = tables.instanceStatusByEvent;
  const prefix = tables.compensatePrefix;
  const known = new Set(graphNodeIds || []);

  function empty(status) {
    return { nodes: {}, edges: {}, status: status || "pending", seq: 0, review: null, partials: {} };
  }

  function nodeOf(state, id) {
    return state.nodes[id] || (state.nodes[id] = { state: null, visits: 0 });
  }

  function apply(state, ev) {
    const p = ev.payload || {};
    state.seq = ev.seq;
    if (instanceStatus[ev.type]) {
      state.status = p.status || instanceStatus[ev.type];
      if (ev.type === "instance_resumed" && p.compensation) state.status = "compensating";
      if (ev.type !== "instance_halted") state.review = null;
    }
    if (ev.type === "instance_halted") {
      (p.parked || []).forEach((id) => { nodeOf(state, id).state = "pending"; });
      const d = p.details || {};
      const at = d.node ? [d.node] : (d.next || []);
      at.forEach((id) => { if (id && known.has(id)) nodeOf(state, id).state = "halted"; });
      state.review = { id: p.review, reason: p.reason, details: d };
    }
    if (ev.type === "human_task_opened") {
      // The instance waits on a person (the server sets `waiting` only when it was running: a halted
      // instance stays halted). The item's inputs are the node's; the panel reads them from the graph.
      if (state.status === "running") state.status = "waiting";
      state.review = { id: p.review, reason: "human_task", node: ev.node, details: { prompt: p.prompt || "" } };
    }
    if (ev.type === "review_decided") state.review = null;
    // A step's fired edges ride on its step_succeeded event (older logs: a separate edges_taken).
    if (ev.type === "edges_taken" || ev.type === "step_succeeded") (p.edges || []).forEach((i) => { state.edges[i] = (state.edges[i] || 0) + 1; });
    let node = ev.node || "";
    const compensation = node.startsWith(prefix);
    if (compensation) node = node.slice(prefix.length);
    let next = nodeState[ev.type];
    if (!node || !next) return state;
    const n = nodeOf(state, node);
    if (compensation) {
      if (next === "succeeded") return state; // its step_compensated event follows
      next = next === "failed" || next === "cancelled" ? next : "compensating";
    } else if (p.visit) {
      n.visits = Math.max(n.visits, p.visit);
    }
    n.state = next;
    if (!STREAMING.has(next)) delete state.partials[node];
    return state;
  }

  /** A partial reply for a node that is (about to be) running; false when ignored: its attempt has
   * ended (a message that arrived after the commit) or it is older than the one shown. */
  function applyPartial(state, msg) {
    if (!msg || typeof msg.node !== "string" || typeof msg.text !== "string") return false;
    const n = state.nodes[msg.node];
    if (!STREAMING.has(n ? n.state : null)) return false;
    const shown = state.partials[msg.node];
    const chars = typeof msg.chars === "number" ? msg.chars : msg.text.length;
    if (shown && shown.step === msg.step && shown.chars > chars) return false;
    state.partials[msg.node] = { step: msg.step, text: msg.text, chars };
    return true;
  }

  function replay(events, upto) {
    const state = empty();
    const n = upto === undefined ? events.length : upto;
    for (let i = 0; i < n; i++) apply(state, events[i]);
    return state;
  }

  const isFinal = (status) => tables.instanceFinal.includes(status);

  /** The node of an event with the compensation prefix removed (the timeline filters by it). */
  const baseNode = (id) => (id && id.startsWith(prefix) ? id.slice(prefix.length) : id || "");

  return { empty, apply, applyPartial, replay, isFinal, baseNode };
}

/** {node id: state} of a state, to compare before and after an event. */
export function nodeStates(state) {
  const out = {};
  Object.keys(state.nodes).forEach((id) => { out[id] = state.nodes[id].state; });
  return out;
}

/** The node state changes between two nodeStates() snapshots, in node order. */
export function transitions(before, after) {
  const out = [];
  Object.keys(after).forEach((id) => {
    if ((before[id] || null) !== after[id]) out.push({ node: id, from: before[id] || null, state: after[id] });
  });
  return out;
}

/* The log in sequence order: events may arrive twice, early or out of order (socket and fetch race);
 * they are applied strictly by seq. add() returns the events now ready, in order; `gap` says an event
 * is waiting for one before it (the caller fetches what is missing). */
export class EventLog {
  constructor() {
    this.events = [];
    this.lastSeq = 0;
    this.buffer = new Map();
  }

  add(events) {
    events.forEach((ev) => {
      if (ev.seq > this.lastSeq && !this.buffer.has(ev.seq)) this.buffer.set(ev.seq, ev);
    });
    const ready = [];
    while (this.buffer.has(this.lastSeq + 1)) {
      const ev = this.buffer.get(this.lastSeq + 1);
      this.buffer.delete(ev.seq);
      this.events.push(ev);
      this.lastSeq = ev.seq;
      ready.push(ev);
    }
    return ready;
  }

  get gap() { return this.buffer.size > 0; }
}

/* The timeline's filters by kind of event. */
export const EVENT_FILTERS = {
  step: (ev) => ev.type.startsWith("step_"),
  instance: (ev) => ev.type.startsWith("instance_"),
  problem: (ev) => /failed|retrying|halted|cancelled|parked/.test(ev.type),
  edge: (ev) => ev.type === "edges_taken" || ev.type === "node_skipped" || Boolean((ev.payload || {}).edges),
  review: (ev) => /review|human|compensat/.test(ev.type),
};
