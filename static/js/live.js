/* The live instance page: the graph coloured by each node's latest step state, kept current from the
 * event log over a WebSocket; the step inspector; the timeline; time travel; operators' actions.
 *
 * State is a pure function of the event log: the page applies events strictly in sequence order.
 * Socket messages that arrive early wait in a buffer; a gap, a reconnect or the server's "hello"
 * (which carries the instance's last sequence number) triggers a fetch of what is missing from
 * GET /api/instances/<id>/events?after=<seq>, so a dropped message never leaves the page stale.
 * Drawing is shared with the editor (static/js/graph-common.js).
 */
(function () {
  "use strict";

  const cfg = JSON.parse(document.getElementById("live-config").textContent);
  // The CSRF token comes on this script's tag (no inline script: the Content-Security-Policy forbids it).
  const CSRF = (document.currentScript && document.currentScript.dataset.csrf) || "";
  const G = window.SteadyflowGraph;
  const $ = (id) => document.getElementById(id);
  const PAGE = 1000;

  // ---- The model: events -> node states -------------------------------------------------------------

  const NODE_STATE = {
    step_queued: "queued", step_started: "running", step_succeeded: "succeeded", step_retrying: "retrying",
    step_failed: "failed", step_waiting: "pending", step_pending: "pending", step_parked: "pending",
    step_cancelled: "cancelled", node_skipped: "skipped", step_compensated: "compensated",
  };
  const INSTANCE_STATUS = {
    instance_started: "running", instance_completed: "completed", instance_failed: "failed",
    instance_cancelled: "cancelled", instance_halted: "halted", instance_resumed: "running",
    instance_retried: "running", instance_rerun: "running", compensation_started: "compensating",
    instance_compensated: "compensated",
  };
  const COMPENSATE = "compensate:";
  const FINAL = ["completed", "failed", "cancelled", "compensated"];

  function emptyState(status) { return { nodes: {}, edges: {}, status: status || "pending", seq: 0, review: null }; }

  function nodeOf(state, id) {
    return state.nodes[id] || (state.nodes[id] = { state: null, visits: 0 });
  }

  /** Apply one event to a state (mutates it). The same function serves live updates and time travel. */
  function applyEvent(state, ev) {
    const p = ev.payload || {};
    state.seq = ev.seq;
    if (INSTANCE_STATUS[ev.type]) {
      state.status = p.status || INSTANCE_STATUS[ev.type];
      if (ev.type === "instance_resumed" && p.compensation) state.status = "compensating";
      if (ev.type !== "instance_halted") state.review = null;
    }
    if (ev.type === "instance_halted") {
      (p.parked || []).forEach((id) => { nodeOf(state, id).state = "pending"; });
      const d = p.details || {};
      const at = d.node ? [d.node] : (d.next || []);
      at.forEach((id) => { if (id && cfg.graphNodes[id]) nodeOf(state, id).state = "halted"; });
      state.review = { id: p.review, reason: p.reason, details: d };
    }
    if (ev.type === "review_decided") state.review = null;
    if (ev.type === "edges_taken") (p.edges || []).forEach((i) => { state.edges[i] = (state.edges[i] || 0) + 1; });
    let node = ev.node || "";
    const compensation = node.indexOf(COMPENSATE) === 0;
    if (compensation) node = node.slice(COMPENSATE.length);
    let next = NODE_STATE[ev.type];
    if (!node || !next) return;
    const n = nodeOf(state, node);
    if (compensation) {
      if (next === "succeeded") return; // its step_compensated event follows
      next = next === "failed" || next === "cancelled" ? next : "compensating";
    } else if (p.visit) {
      n.visits = Math.max(n.visits, p.visit);
    }
    n.state = next;
  }

  function replay(events, upto) {
    const state = emptyState();
    for (let i = 0; i < upto; i++) applyEvent(state, events[i]);
    return state;
  }

  // ---- The store: events in sequence order --------------------------------------------------------

  const store = {
    events: [], lastSeq: 0, buffer: new Map(), live: emptyState(cfg.instance.status),
    fetching: false, again: false, socket: null, connected: false, retryMs: 500, stopped: false,
    socketEvents: 0, fetchedEvents: 0, pendingPaint: [],
  };
  // Read by tests and the benchmark (bench/live.py): when each event was painted, what was drawn.
  const paints = new Map();
  const received = new Map(); // when each event arrived on the socket (the benchmark splits the lag)
  const history = [];

  function ingest(events, fromSocket) {
    let changed = false;
    events.forEach((ev) => {
      if (ev.seq > store.lastSeq && !store.buffer.has(ev.seq)) store.buffer.set(ev.seq, ev);
    });
    while (store.buffer.has(store.lastSeq + 1)) {
      const ev = store.buffer.get(store.lastSeq + 1);
      store.buffer.delete(ev.seq);
      store.events.push(ev);
      store.lastSeq = ev.seq;
      const before = snapshotStates(store.live);
      applyEvent(store.live, ev);
      noteTransitions(before, ev, fromSocket);
      store.pendingPaint.push(ev.seq);
      if (fromSocket) store.socketEvents++; else store.fetchedEvents++;
      changed = true;
    }
    // A hole before the next buffered event: fetch it rather than wait for a message that may be lost.
    if (store.buffer.size) catchUp();
    if (changed) onEventsApplied();
  }

  async function catchUp() {
    if (store.fetching) { store.again = true; return; }
    store.fetching = true;
    try {
      for (;;) {
        const before = store.lastSeq;
        const data = await getJSON(cfg.urls.events + "?after=" + store.lastSeq + "&limit=" + PAGE);
        ingest(data.events || [], false);
        if (store.lastSeq >= data.last_seq || store.lastSeq === before) break;
      }
    } catch (err) {
      setConn(store.connected ? "live" : "offline", "catch-up failed: " + err.message);
      setTimeout(catchUp, 3000);
    } finally {
      store.fetching = false;
      if (store.again) { store.again = false; catchUp(); }
    }
  }

  // ---- The socket ----------------------------------------------------------------------------------

  function connect() {
    if (store.stopped) return;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + cfg.urls.ws);
    store.socket = ws;
    setConn("connecting", "connecting…");
    ws.onopen = () => { store.retryMs = 500; };
    ws.onmessage = (msg) => {
      const data = JSON.parse(msg.data);
      if (data.type === "hello") {
        store.connected = true;
        setConn("live", "live");
        if (data.last_seq > store.lastSeq) catchUp();
      } else if (data.type === "event") {
        if (received.size < 20000) received.set(data.event.seq, performance.timeOrigin + performance.now());
        ingest([data.event], true);
      } else if (data.type === "error") {
        store.stopped = true;
        setConn("refused", data.message);
      }
    };
    ws.onclose = (e) => {
      store.connected = false;
      if (store.socket === ws) store.socket = null;
      if (e.code >= 4400 && e.code < 4500) { store.stopped = true; return; }
      if (store.stopped) return;
      setConn("offline", "reconnecting…");
      setTimeout(connect, store.retryMs);
      store.retryMs = Math.min(store.retryMs * 2, 4000);
    };
  }

  // While the socket is down the event log is still polled, so the page stays current without it.
  setInterval(() => { if (!store.connected && !store.stopped) catchUp(); }, 5000);

  function setConn(state, text) {
    const el = $("conn");
    el.dataset.state = state;
    el.textContent = text;
  }

  // ---- Drawing -------------------------------------------------------------------------------------

  cfg.graphNodes = {};
  (cfg.graph.nodes || []).forEach((n) => { cfg.graphNodes[n.id] = n; });

  const LIGHT = ["pending", "queued", "skipped", "cancelled"];
  function liveStyle() {
    const rules = [
      { selector: "node", style: {
        "background-color": "#f1f5f9", "color": "#0f172a", "border-color": "#334155", "border-width": 2,
        "border-opacity": 0.45,
      } },
      { selector: "edge.taken", style: {
        "line-color": "#16a34a", "target-arrow-color": "#16a34a", "width": 4, "line-style": "solid",
      } },
      // Only running nodes animate (their halo breathes): other state changes redraw once.
      { selector: "node.status-running", style: {
        "transition-property": "underlay-opacity, underlay-padding", "transition-duration": "0.6s",
      } },
      { selector: "node.pulse", style: { "underlay-padding": 16, "underlay-opacity": 0.15 } },
      { selector: "node:selected", style: { "border-color": "#1d4ed8", "border-width": 5 } },
    ];
    Object.keys(G.STATUS_COLORS).forEach((status) => {
      rules.push({ selector: "node.status-" + status, style: {
        "background-color": G.STATUS_COLORS[status],
        "color": LIGHT.indexOf(status) >= 0 ? "#0f172a" : "#fff",
      } });
    });
    return G.style().concat(rules);
  }

  const cyOptions = { style: liveStyle(), autoungrabify: true, boxSelectionEnabled: false, maxZoom: 1.5 };
  // Positions saved by the editor are kept; otherwise a tighter layered layout than the editor's, so
  // a long chain still reads at the page's width.
  if (!G.hasPositions(cfg.graph)) cyOptions.layout = G.layoutOptions("LR", { rankSep: 45, nodeSep: 28, padding: 24 });
  const cy = G.create($("cy"), cfg.graph, cfg.nodeTypes, { layout: "LR", cytoscape: cyOptions });
  cy.on("tap", "node", (e) => selectNode(e.target.id()));
  cy.on("tap", (e) => { if (e.target === cy) selectNode(null); });

  const badgeLayer = $("badges");
  const badges = {};
  cy.nodes().forEach((n) => {
    const b = document.createElement("span");
    b.className = "visit-badge";
    b.hidden = true;
    b.dataset.node = n.id();
    badgeLayer.appendChild(b);
    badges[n.id()] = b;
  });
  let badgeFrame = 0;
  function placeBadges() {
    badgeFrame = 0;
    cy.nodes().forEach((n) => {
      const bb = n.renderedBoundingBox({ includeLabels: false, includeUnderlay: false, includeOverlays: false });
      const b = badges[n.id()];
      b.style.left = (bb.x2 - 10) + "px";
      b.style.top = (bb.y1 - 10) + "px";
    });
  }
  // Nodes do not move (autoungrabify): badges follow only the viewport, not every redraw.
  cy.on("pan zoom resize layoutstop", () => { if (!badgeFrame) badgeFrame = requestAnimationFrame(placeBadges); });
  badgeFrame = requestAnimationFrame(placeBadges);

  // What is on screen, so a redraw touches only what changed (restyling every node costs a frame).
  const onScreen = { nodes: {}, edges: {} };
  function draw(state) {
    cy.batch(() => {
      cy.nodes().forEach((n) => {
        const id = n.id();
        const info = state.nodes[id];
        const status = info ? info.state : null;
        const visits = info ? info.visits : 0;
        const was = onScreen.nodes[id];
        if (was && was.status === status && was.visits === visits) return;
        onScreen.nodes[id] = { status: status, visits: visits };
        G.setStatus(cy, id, status);
        if (status !== "running") n.removeClass("pulse");
        const b = badges[id];
        b.hidden = !visits;
        b.textContent = visits > 1 ? "×" + visits : String(visits);
        b.title = visits + " visit(s)";
      });
      cy.edges().forEach((e) => {
        const index = Number(e.id().slice(1));
        const taken = Boolean(state.edges[index]);
        if (onScreen.edges[index] === taken) return;
        onScreen.edges[index] = taken;
        e.toggleClass("taken", taken);
      });
    });
  }

  // Running nodes breathe: the pulse class toggles and cytoscape animates the halo between the two.
  let pulseOn = false;
  setInterval(() => {
    pulseOn = !pulseOn;
    cy.nodes(".status-running").forEach((n) => { n.toggleClass("pulse", pulseOn); });
  }, 700);

  function renderedState(id) {
    const n = cy.getElementById(id);
    if (n.empty()) return null;
    const cls = n.classes().find((c) => c.indexOf("status-") === 0);
    return cls ? cls.slice(7) : null;
  }

  // ---- Time travel -------------------------------------------------------------------------------

  const travel = $("travel");
  let travelAt = null; // null: live; otherwise how many events are applied

  function setTravel(count) {
    const n = store.events.length;
    if (count === null || count >= n) {
      travelAt = null;
      travel.value = String(n);
      $("travel-banner").hidden = true;
      $("travel-label").textContent = "live · " + n + " events";
      draw(store.live);
    } else {
      travelAt = Math.max(0, count);
      travel.value = String(travelAt);
      const ev = store.events[travelAt - 1];
      $("travel-banner").hidden = false;
      $("travel-seq").textContent = ev ? "#" + ev.seq + " " + ev.type + (ev.node ? " " + ev.node : "") : "(none)";
      $("travel-label").textContent = travelAt + " / " + n + (ev ? " · " + fmtTime(ev.at) : "");
      draw(replay(store.events, travelAt));
    }
    renderTimelineMarker();
  }
  travel.addEventListener("input", () => setTravel(Number(travel.value)));
  $("btn-live").addEventListener("click", () => setTravel(null));
  $("btn-step-back").addEventListener("click", () => setTravel((travelAt === null ? store.events.length : travelAt) - 1));
  $("btn-step-fwd").addEventListener("click", () => { if (travelAt !== null) setTravel(travelAt + 1); });

  // ---- After events are applied --------------------------------------------------------------------

  let factsTimer = 0;
  function onEventsApplied() {
    travel.max = String(store.events.length);
    if (travelAt === null) {
      setTravel(null);
    } else {
      $("travel-label").textContent = travelAt + " / " + store.events.length;
    }
    const seqs = store.pendingPaint;
    store.pendingPaint = [];
    // The frame after this one has painted what was just drawn: that moment is the repaint.
    requestAnimationFrame(() => setTimeout(() => {
      const t = performance.timeOrigin + performance.now();
      seqs.forEach((s) => { if (!paints.has(s)) paints.set(s, t); });
      if (paints.size > 20000) paints.clear();
    }, 0));
    renderStatus(store.live.status);
    renderReview();
    appendTimeline();
    $("inst-events").textContent = String(store.lastSeq);
    if (!factsTimer) factsTimer = setTimeout(refreshFacts, 600);
    if (selected) scheduleInspector();
  }

  function snapshotStates(state) {
    const out = {};
    Object.keys(state.nodes).forEach((id) => { out[id] = state.nodes[id].state; });
    return out;
  }

  /** Every node state change, in the order the events were applied (the e2e tests read it). */
  function noteTransitions(before, ev, fromSocket) {
    const now = Date.now();
    Object.keys(store.live.nodes).forEach((id) => {
      const is = store.live.nodes[id].state;
      if ((before[id] || null) !== is) {
        history.push({ node: id, from: before[id] || null, state: is, seq: ev.seq, socket: fromSocket, t: now });
      }
    });
    if (history.length > 5000) history.splice(0, history.length - 5000);
  }

  async function refreshFacts() {
    factsTimer = 0;
    try {
      const inst = await getJSON(cfg.urls.instance);
      $("inst-loop").textContent = inst.loop_count;
      if (inst.max_transitions !== undefined) $("inst-max").textContent = inst.max_transitions;
      $("inst-tokens").textContent = inst.tokens;
      $("inst-cost").textContent = Number(inst.cost_usd).toFixed(6);
      const err = $("inst-error");
      if (inst.error && inst.error.message) {
        err.hidden = false;
        err.textContent = (inst.reason ? inst.reason + ": " : "") + inst.error.message;
      } else {
        err.hidden = true;
      }
      lastInstance = inst;
      renderActions();
    } catch (e) { /* the next event retries */ }
  }
  let lastInstance = null;

  function renderStatus(status) {
    const el = $("inst-status");
    if (el.dataset.status === status) return;
    el.className = "badge status-" + status;
    el.dataset.status = status;
    el.textContent = status;
    renderActions();
  }

  // ---- Actions -------------------------------------------------------------------------------------

  function renderActions() {
    const status = store.live.status;
    const op = cfg.canOperate;
    $("btn-cancel").hidden = !op || ["running", "waiting", "halted", "pending"].indexOf(status) < 0;
    const failedNode = Object.keys(store.live.nodes).some((id) => store.live.nodes[id].state === "failed");
    $("btn-retry").hidden = !op || status !== "failed" || !failedNode;
    if (selected) renderInspectorActions();
  }

  async function act(url, body, msgEl, confirmText) {
    if (confirmText && !window.confirm(confirmText)) return null;
    msgEl.textContent = "…";
    msgEl.classList.remove("error");
    try {
      const data = await postJSON(url, body || {});
      msgEl.textContent = "done";
      setTimeout(() => { if (msgEl.textContent === "done") msgEl.textContent = ""; }, 2500);
      catchUp();
      return data;
    } catch (err) {
      msgEl.textContent = err.message;
      msgEl.classList.add("error");
      return null;
    }
  }

  $("btn-cancel").addEventListener("click", () => act(cfg.urls.cancel, {}, $("action-msg"),
    "Cancel instance " + cfg.instance.id + "? Its open steps are cancelled."));
  $("btn-retry").addEventListener("click", () => act(cfg.urls.retry, {}, $("action-msg")));

  // Review actions (workflows/review.py) for a halted instance with an open review item.
  if (cfg.review) store.live.review = cfg.review;
  const gotoSel = $("rv-goto");
  (cfg.graph.nodes || []).filter((n) => n.type !== "start").forEach((n) => {
    const o = document.createElement("option");
    o.value = n.id; o.textContent = n.id;
    gotoSel.appendChild(o);
  });
  function renderReview() {
    const item = store.live.status === "halted" ? store.live.review : null;
    const box = $("review");
    box.hidden = !item;
    if (!item) return;
    $("review-reason").textContent = (item.reason || "review").replace(/_/g, " ");
    $("review-message").textContent = (item.details && item.details.message) || "";
    $("review-readonly").hidden = cfg.canDecide;
    const link = $("review-link");
    link.hidden = !(cfg.urls.reviewDetail && item.id);
    if (!link.hidden) link.href = cfg.urls.reviewDetail.replace("{id}", item.id);
    box.querySelectorAll("button[data-action], .review-form").forEach((b) => { b.hidden = !cfg.canDecide; });
  }
  $("review").querySelectorAll("button[data-action]").forEach((b) => {
    b.addEventListener("click", () => {
      const action = b.dataset.action;
      const item = store.live.review || {};
      const body = { action: action, note: $("rv-note").value, item: item.id || null };
      const extra = $("rv-transitions").value;
      const budget = $("rv-budget").value;
      if (extra !== "") body.extra_transitions = Number(extra);
      if (budget !== "") body.extra_budget_usd = budget;
      if (action === "reroute") body.goto = gotoSel.value;
      const ask = action === "reject" ? "Reject: the instance fails (and compensates). Continue?"
        : action === "cancel" ? "Cancel this instance?" : null;
      act(cfg.urls.review, body, $("review-msg"), ask);
    });
  });

  // ---- Step inspector ------------------------------------------------------------------------------

  let selected = null;
  let inspectorTimer = 0;
  let inspectorRuns = [];

  function selectNode(id) {
    selected = id;
    cy.nodes().unselect();
    if (!id) {
      $("insp-title").textContent = "Step inspector";
      $("insp-hint").hidden = false;
      $("insp-runs").innerHTML = "";
      $("insp-actions").innerHTML = "";
      return;
    }
    cy.getElementById(id).select();
    const node = cfg.graphNodes[id] || {};
    $("insp-title").textContent = id + " · " + (node.type || "");
    $("insp-hint").hidden = true;
    $("insp-runs").innerHTML = "<p class='hint'>loading…</p>";
    loadInspector();
  }

  function scheduleInspector() {
    if (!inspectorTimer) inspectorTimer = setTimeout(loadInspector, 300);
  }

  async function loadInspector() {
    inspectorTimer = 0;
    const id = selected;
    if (!id) return;
    try {
      const data = await getJSON(cfg.urls.steps + "?node=" + encodeURIComponent(id));
      if (id !== selected) return;
      inspectorRuns = data.steps || [];
      renderInspector();
    } catch (err) {
      $("insp-runs").innerHTML = "";
      $("insp-runs").appendChild(el("p", "error", "could not load the runs: " + err.message));
    }
  }

  function renderInspectorActions() {
    const box = $("insp-actions");
    box.innerHTML = "";
    if (!cfg.canOperate || !selected) return;
    const msg = el("span", "hint", "");
    msg.setAttribute("role", "status");
    const node = cfg.graphNodes[selected] || {};
    const status = store.live.status;
    if (["failed", "cancelled", "completed"].indexOf(status) >= 0 && ["start", "end"].indexOf(node.type) < 0
        && inspectorRuns.length) {
      const b = el("button", "", "Rerun from " + selected);
      b.type = "button";
      b.id = "btn-rerun";
      b.title = "A new visit of this node, from the checkpoint taken when it last started";
      b.addEventListener("click", () => act(cfg.urls.rerun, { node: selected }, msg,
        "Rerun instance " + cfg.instance.id + " from node " + selected + "?"));
      box.appendChild(b);
    }
    const latest = inspectorRuns.filter((r) => r.node === selected).slice(-1)[0];
    if (status === "failed" && latest && latest.status === "failed") {
      const b = el("button", "", "Retry this step");
      b.type = "button";
      b.id = "btn-retry-step";
      b.addEventListener("click", () => act(cfg.urls.retry, { step: latest.id }, msg));
      box.appendChild(b);
    }
    box.appendChild(msg);
  }

  function renderInspector() {
    renderInspectorActions();
    const box = $("insp-runs");
    box.innerHTML = "";
    if (!inspectorRuns.length) {
      box.appendChild(el("p", "hint", "This node has not run in this instance."));
      return;
    }
    inspectorRuns.slice().reverse().forEach((run, i) => {
      const d = document.createElement("details");
      d.className = "run";
      d.open = i === 0;
      const sum = document.createElement("summary");
      const comp = run.node !== selected ? " (compensation)" : "";
      sum.appendChild(el("span", "badge status-" + run.status, run.status));
      sum.appendChild(document.createTextNode(" visit " + run.visit + " · attempt " + run.attempt + comp));
      d.appendChild(sum);
      const dl = el("dl", "facts", "");
      const usage = run.usage || {};
      const facts = [
        ["Queue", run.queue], ["Worker", run.worker || "—"], ["Started", fmtTime(run.started_at)],
        ["Finished", fmtTime(run.finished_at)],
        ["Duration", run.duration_ms === null ? "—" : fmtMs(run.duration_ms)],
        ["Tokens", run.tokens ? run.tokens + " (" + (usage.prompt_tokens || 0) + " in, "
          + (usage.completion_tokens || 0) + " out)" : "—"],
        ["Cost", run.cost_usd ? "$" + run.cost_usd.toFixed(6) : "—"],
        ["Model", usage.model || "—"],
        ["Idempotency key", run.idempotency_key],
      ];
      if (run.degraded) facts.push(["Degraded", "yes (fallback)"]);
      facts.forEach(([k, v]) => { dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", String(v))); });
      d.appendChild(dl);
      if (run.error) {
        d.appendChild(el("h4", "error", "Error"));
        d.appendChild(el("p", "error", run.error.message || ""));
        const tb = run.error.traceback;
        const rest = Object.assign({}, run.error);
        delete rest.traceback;
        d.appendChild(el("pre", "json", JSON.stringify(rest, null, 2)));
        if (tb) d.appendChild(el("pre", "traceback", tb));
      }
      d.appendChild(el("h4", "", "Input"));
      d.appendChild(el("pre", "json", run.input === null ? "—" : JSON.stringify(run.input, null, 2)));
      d.appendChild(el("h4", "", "Output"));
      d.appendChild(el("pre", "json", run.output === null ? "—" : JSON.stringify(run.output, null, 2)));
      box.appendChild(d);
    });
  }

  // ---- Timeline ------------------------------------------------------------------------------------

  const KIND = {
    step: (ev) => ev.type.indexOf("step_") === 0,
    instance: (ev) => ev.type.indexOf("instance_") === 0,
    problem: (ev) => /failed|retrying|halted|cancelled|parked/.test(ev.type),
    edge: (ev) => ev.type === "edges_taken" || ev.type === "node_skipped",
    review: (ev) => /review|human|compensat/.test(ev.type),
  };
  const tbody = document.querySelector("#timeline tbody");
  const nodeSel = $("tl-node");
  (cfg.graph.nodes || []).forEach((n) => {
    const o = document.createElement("option");
    o.value = n.id; o.textContent = n.id;
    nodeSel.appendChild(o);
  });
  let rendered = 0;

  function summary(ev) {
    const p = ev.payload || {};
    const parts = [];
    if (p.visit) parts.push("visit " + p.visit);
    if (p.attempt) parts.push("attempt " + p.attempt);
    if (p.worker) parts.push(p.worker);
    if (p.queue && ev.type === "step_queued") parts.push("on " + p.queue);
    if (p.duration_ms !== undefined && p.duration_ms !== null) parts.push(fmtMs(p.duration_ms));
    if (p.retry_in_s !== undefined) parts.push("retry in " + p.retry_in_s + " s");
    if (p.edges) parts.push("edges " + p.edges.map((i) => edgeName(i)).join(", "));
    if (p.reason) parts.push(String(p.reason));
    if (p.by) parts.push("by " + p.by);
    if (p.action) parts.push(p.action);
    const err = p.error || (p.details && p.details.message ? p.details : null);
    if (err && err.message) parts.push(err.message);
    if (p.usage && p.usage.cost_usd) parts.push("$" + Number(p.usage.cost_usd).toFixed(6));
    return parts.join(" · ");
  }

  function edgeName(i) {
    const e = (cfg.graph.edges || [])[i];
    return e ? e.source + "→" + e.target : "#" + i;
  }

  function matches(ev) {
    const kind = $("tl-kind").value;
    if (kind && !KIND[kind](ev)) return false;
    const node = nodeSel.value;
    if (node && ev.node !== node && ev.node !== COMPENSATE + node) return false;
    const text = $("tl-text").value.trim().toLowerCase();
    if (text && (ev.type + " " + ev.node + " " + summary(ev)).toLowerCase().indexOf(text) < 0) return false;
    return true;
  }

  function rowFor(ev) {
    const tr = document.createElement("tr");
    tr.dataset.seq = ev.seq;
    tr.className = "ev ev-" + ev.type;
    const t0 = store.events.length ? Date.parse(store.events[0].at) : Date.parse(ev.at);
    [String(ev.seq), fmtTime(ev.at), ((Date.parse(ev.at) - t0) / 1000).toFixed(3)].forEach((v) => tr.appendChild(el("td", "", v)));
    const type = el("td", "", "");
    type.appendChild(el("span", "evtype", ev.type));
    tr.appendChild(type);
    tr.appendChild(el("td", "", ev.node || ""));
    tr.appendChild(el("td", "details", summary(ev)));
    tr.title = "Show the graph as it stood after this event";
    tr.addEventListener("click", () => {
      const index = store.events.findIndex((x) => x.seq === ev.seq);
      setTravel(index + 1);
    });
    return tr;
  }

  function renderTimeline() {
    tbody.innerHTML = "";
    rendered = 0;
    appendTimeline();
  }

  function appendTimeline() {
    const frag = document.createDocumentFragment();
    for (; rendered < store.events.length; rendered++) {
      const ev = store.events[rendered];
      if (matches(ev)) frag.appendChild(rowFor(ev));
    }
    tbody.appendChild(frag);
    $("tl-count").textContent = tbody.children.length + " of " + store.events.length + " events";
    renderTimelineMarker();
  }

  function renderTimelineMarker() {
    const current = travelAt === null ? null : (store.events[travelAt - 1] || {}).seq;
    tbody.querySelectorAll("tr.current").forEach((r) => r.classList.remove("current"));
    if (current) {
      const row = tbody.querySelector("tr[data-seq='" + current + "']");
      if (row) row.classList.add("current");
    }
  }

  ["tl-kind", "tl-node"].forEach((id) => $(id).addEventListener("change", renderTimeline));
  $("tl-text").addEventListener("input", renderTimeline);

  // ---- Legend ----------------------------------------------------------------------------------------

  ["pending", "queued", "running", "retrying", "succeeded", "failed", "skipped", "compensated", "halted",
    "cancelled"].forEach((s) => {
    const li = el("li", "", s);
    const sw = el("span", "swatch", "");
    sw.style.background = G.STATUS_COLORS[s];
    li.prepend(sw);
    $("legend").appendChild(li);
  });
  $("legend").appendChild(el("li", "hint", "badge: visits · green edges: taken"));

  // ---- Helpers ---------------------------------------------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  }

  function fmtTime(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function fmtMs(ms) { return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Number(ms).toFixed(1) + " ms"; }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.message || r.status + " " + r.statusText);
    return data;
  }

  async function postJSON(url, body) {
    const r = await fetch(url, {
      method: "POST", credentials: "same-origin", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": CSRF },
    });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.message || r.status + " " + r.statusText);
    return data;
  }

  // ---- Start -----------------------------------------------------------------------------------------

  draw(store.live);
  renderActions();
  renderReview();
  connect();
  catchUp();

  window.steadyflowLive = {
    cy: cy, store: store, paints: paints, received: received, history: history,
    stateOf: (id) => (store.live.nodes[id] || {}).state || null,
    renderedState: renderedState,
    visits: (id) => (store.live.nodes[id] || {}).visits || 0,
    takenEdges: () => cy.edges(".taken").map((e) => e.id()),
    travelAt: () => travelAt,
    setTravel: setTravel,
    select: selectNode,
    isFinal: () => FINAL.indexOf(store.live.status) >= 0,
  };
})();
