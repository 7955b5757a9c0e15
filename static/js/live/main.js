/* The live instance page: the graph coloured by each node's latest step state, kept current from the
 * event log over a WebSocket; the step inspector; the timeline; time travel; operators' actions.
 *
 * State is a pure function of the event log (reducer.js): the page applies events strictly in sequence
 * order. Socket messages that arrive early wait in a buffer; a gap, a reconnect or the server's "hello"
 * (which carries the instance's last sequence number) triggers a fetch of what is missing from
 * GET /api/instances/<id>/events?after=<seq>, so a dropped message never leaves the page stale.
 *
 * Modules: reducer.js (pure model), lib/socket.js (the socket), canvas.js (drawing), inspector.js,
 * timeline.js (timeline and time travel), actions.js (header, actions, review panel).
 */

import { byId as $, el, jsonScript } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";
import { meta } from "../lib/meta.js";
import { openSocket } from "../lib/socket.js";
import { createReducer, EventLog, nodeStates, transitions } from "./reducer.js";
import { createCanvas } from "./canvas.js";
import { createInspector } from "./inspector.js";
import { bindGraphKeys } from "../lib/graph-keys.js";
import { createTimeline } from "./timeline.js";
import { createActions } from "./actions.js";
import { jsonPanel } from "./json-view.js";

const PAGE = 1000;
const cfg = jsonScript("live-config");
const tables = meta();
const graphNodes = {};
(cfg.graph.nodes || []).forEach((n) => { graphNodes[n.id] = n; });

const reducer = createReducer(tables, Object.keys(graphNodes));
const log = new EventLog();
const store = {
  log, live: reducer.empty(cfg.instance.status), fetching: false, again: false, socketEvents: 0,
  fetchedEvents: 0, pendingPaint: [],
  get lastSeq() { return log.lastSeq; },
  get events() { return log.events; },
};
if (cfg.review) store.live.review = cfg.review;
// Read by tests and the benchmark (bench/live.py): when each event was painted, what was drawn.
const paints = new Map();
const received = new Map(); // when each event arrived on the socket (the benchmark splits the lag)
const history = []; // every node state change, in the order the events were applied (the e2e tests read it)
const partialLog = []; // the partial replies applied, in order (the e2e tests read it)

const page = { cfg, log, reducer, graphNodes, live: () => store.live, catchUp };
// The input and the latest context (the result, once the instance has finished): JSON viewers.
let context = cfg.instance.context || {};
page.context = () => context;
const contextPanel = jsonPanel(context, { label: "context" });
$("io-input").appendChild(jsonPanel(cfg.instance.input || {}, { label: "input", openDepth: 1 }));
$("io-context").appendChild(contextPanel);
function renderContextTitle(status) {
  $("io-context-title").textContent = reducer.isFinal(status) ? "Result (final context)" : "Context";
}
renderContextTitle(cfg.instance.status);
page.onStatus = renderContextTitle;
page.onInstance = (inst) => {
  if (JSON.stringify(inst.context) !== JSON.stringify(context)) {
    context = inst.context || {};
    contextPanel.update(context);
  }
  refreshNodeStats();
};

// Per-node cost and duration on the graph, from the step runs (GET .../steps), after the facts.
let statsTimer = 0;
function refreshNodeStats() {
  if (!statsTimer) statsTimer = setTimeout(loadNodeStats, 300);
}
async function loadNodeStats() {
  statsTimer = 0;
  try {
    const data = await getJSON(cfg.urls.steps);
    const stats = {};
    (data.steps || []).forEach((s) => {
      const n = stats[s.node] || (stats[s.node] = { cost: 0, ms: 0, runs: 0, tokens: 0 });
      n.cost += s.cost_usd || 0;
      n.ms += s.duration_ms || 0;
      n.tokens += s.tokens || 0;
      n.runs += 1;
    });
    page.canvas.setStats(stats);
  } catch (e) { /* the next refresh tries again */ }
}
page.canvas = createCanvas($("cy"), $("badges"), cfg.graph, cfg.nodeTypes, tables);
page.inspector = createInspector(page);
page.act = (...args) => page.actions.act(...args);
page.actions = createActions(page);
page.timeline = createTimeline(page);
const { cy } = page.canvas;
// Cytoscape caches where its canvas is on the page. What sits above it changes height without resizing it
// (the header's error line when a run fails, the decision panel), and a click would then be mapped to where
// the canvas was: told of each such change, it measures again.
const aboveGraph = new ResizeObserver(() => cy.resize());
[document.querySelector(".live-head"), $("review")].forEach((el) => el && aboveGraph.observe(el));
cy.on("tap", "node", (e) => page.inspector.select(e.target.id()));
cy.on("tap", (e) => { if (e.target === cy) page.inspector.select(null); });
bindGraphKeys($("cy"), cy, (id) => page.inspector.select(id));

function ingest(events, fromSocket) {
  const ready = log.add(events);
  const now = Date.now();
  ready.forEach((ev) => {
    const before = nodeStates(store.live);
    reducer.apply(store.live, ev);
    transitions(before, nodeStates(store.live)).forEach((t) => history.push(
      Object.assign(t, { seq: ev.seq, socket: fromSocket, t: now })));
    store.pendingPaint.push(ev.seq);
    if (fromSocket) store.socketEvents++; else store.fetchedEvents++;
  });
  if (history.length > 5000) history.splice(0, history.length - 5000);
  // A hole before the next buffered event: fetch it rather than wait for a message that may be lost.
  if (log.gap) catchUp();
  if (ready.length) onEventsApplied();
}

async function catchUp() {
  if (store.fetching) { store.again = true; return; }
  store.fetching = true;
  try {
    for (;;) {
      const before = log.lastSeq;
      const data = await getJSON(cfg.urls.events + "?after=" + log.lastSeq + "&limit=" + PAGE);
      ingest(data.events || [], false);
      if (log.lastSeq >= data.last_seq || log.lastSeq === before) break;
    }
  } catch (err) {
    setConn(socket.connected ? "live" : "offline", "catch-up failed: " + err.message);
    setTimeout(catchUp, 3000);
  } finally {
    store.fetching = false;
    if (store.again) { store.again = false; catchUp(); }
  }
}

function onEventsApplied() {
  page.timeline.onEvents();
  const seqs = store.pendingPaint;
  store.pendingPaint = [];
  // The frame after this one has painted what was just drawn: that moment is the repaint.
  requestAnimationFrame(() => setTimeout(() => {
    const t = performance.timeOrigin + performance.now();
    seqs.forEach((s) => { if (!paints.has(s)) paints.set(s, t); });
    if (paints.size > 20000) paints.clear();
  }, 0));
  page.actions.renderStatus();
  page.actions.renderReview();
  $("inst-events").textContent = String(log.lastSeq);
  page.actions.refreshFactsSoon();
  page.inspector.refreshSoon();
  page.inspector.renderPartial(); // an attempt that ended drops its partial reply at once
}

function setConn(state, text) {
  const conn = $("conn");
  conn.dataset.state = state;
  conn.textContent = text;
}

function onMessage(data, sock) {
  if (data.type === "hello") {
    sock.connected = true;
    setConn("live", "live");
    if (data.last_seq > log.lastSeq) catchUp();
  } else if (data.type === "event") {
    if (received.size < 20000) received.set(data.event.seq, performance.timeOrigin + performance.now());
    ingest([data.event], true);
  } else if (data.type === "partial") {
    // A streaming llm step's reply so far: not an event (no seq, not in the log); the reducer keeps it
    // only while the step runs.
    if (reducer.applyPartial(store.live, data)) {
      partialLog.push({ node: data.node, step: data.step, chars: data.chars });
      if (partialLog.length > 5000) partialLog.splice(0, partialLog.length - 5000);
      page.inspector.renderPartial();
    }
  } else if (data.type === "error") {
    sock.stopped = true;
    setConn("refused", data.message);
  }
}

// ---- Legend (the statuses and colours come from the server: lib/meta.js) ----
tables.legend.forEach((s) => {
  $("legend").appendChild(el("li", {}, el("span", { class: "swatch", style: "background:" + tables.statusColors[s] }), s));
});
$("legend").appendChild(el("li", { class: "hint" }, "badge: visits · green edges: taken"));

// ---- Start ----
page.canvas.draw(store.live);
page.actions.renderButtons();
page.actions.renderReview();
const socket = openSocket(cfg.urls.ws, { onMessage, onState: setConn });
// While the socket is down the event log is still polled, so the page stays current without it.
setInterval(() => { if (!socket.connected && !socket.stopped) catchUp(); }, 5000);
catchUp();
page.actions.refreshFactsSoon();

window.steadyflowLive = {
  cy, store, paints, received, history, partialLog,
  stateOf: (id) => (store.live.nodes[id] || {}).state || null,
  renderedState: page.canvas.renderedState,
  visits: (id) => (store.live.nodes[id] || {}).visits || 0,
  takenEdges: () => cy.edges(".taken").map((e) => e.id()),
  travelAt: () => page.timeline.travelAt(),
  setTravel: (count) => page.timeline.setTravel(count),
  select: (id) => page.inspector.select(id),
  isFinal: () => reducer.isFinal(store.live.status),
};
