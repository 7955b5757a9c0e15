/* The operations dashboard: figures from GET /api/dashboard, refreshed when the `dashboard` group
 * reports changes (the consumer coalesces events into at most two messages a second) and every
 * REFRESH_MS anyway (workers come and go without events). At most one request per MIN_GAP_MS. */
(function () {
  "use strict";

  const script = document.currentScript;
  const STATS_URL = script.dataset.statsUrl;
  const LIST_URL = script.dataset.instancesUrl;
  const REFRESH_MS = 10000;
  const MIN_GAP_MS = 1000;
  const $ = (id) => document.getElementById(id);
  const ORDER = ["running", "waiting", "pending", "halted", "completed", "failed", "cancelled", "compensating",
    "compensated"];

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function link(href, text) {
    const a = el("a", text);
    a.href = href;
    return a;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    cells.forEach((c) => {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "—" : String(c);
      tr.appendChild(td);
    });
    return tr;
  }

  function fill(tbody, rows, emptyText, columns) {
    tbody.innerHTML = "";
    if (!rows.length) {
      const td = el("td", emptyText, "empty");
      td.colSpan = columns;
      const tr = document.createElement("tr");
      tr.appendChild(td);
      tbody.appendChild(tr);
      return;
    }
    rows.forEach((r) => tbody.appendChild(r));
  }

  function ago(iso) {
    if (!iso) return "—";
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }

  function ms(v) {
    if (v === null || v === undefined) return "—";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : v.toFixed(1) + " ms";
  }

  // ---- Rendering ---------------------------------------------------------------------------------

  let chart = null;

  function render(stats) {
    const counts = $("counts");
    counts.innerHTML = "";
    ORDER.forEach((status) => {
      const a = link(LIST_URL + "?status=" + status, "");
      a.className = "tile status-" + status;
      a.dataset.status = status;
      a.appendChild(el("span", stats.counts[status] || 0, "n"));
      a.appendChild(el("span", status, "label"));
      counts.appendChild(a);
    });

    const hour = stats.steps.hour;
    $("hour-rate").textContent = hour.per_minute;
    $("hour-ok").textContent = hour.ok;
    $("hour-failed").textContent = hour.failed;
    $("hour-p50").textContent = ms(hour.p50_ms);
    $("hour-p95").textContent = ms(hour.p95_ms);
    renderChart(stats.steps.minutes);

    $("reviews-open").textContent = stats.reviews.open;
    fill($("reviews"), stats.reviews.latest.map((r) => row([
      link("/instances/" + r.instance + "/", "#" + r.instance), r.workflow, r.reason.replace(/_/g, " "), ago(r.created_at),
    ])), "No open review items.", 4);

    fill($("breakers"), stats.breakers.map((b) => {
      const state = el("span", b.state.replace("_", "-"), "badge breaker-" + b.state);
      return row([b.key, state, b.calls, b.failures, b.cooldown_left_s === null ? "—" : b.cooldown_left_s + " s"]);
    }), "No LLM provider has been called yet.", 5);

    const q = stats.queues;
    $("queues-error").hidden = !q.error;
    $("queues-error").textContent = q.error || "";
    fill($("queues"), q.queues.map((x) => row([x.name, x.queued, x.running, x.scheduled, x.workers, x.busy_workers])),
      q.error ? "Unavailable." : "No queues.", 6);

    fill($("failures"), stats.failures.map((f) => row([
      link("/instances/" + f.id + "/", "#" + f.id), f.workflow, (f.reason || f.status).replace(/_/g, " "),
      (f.node ? f.node + ": " : "") + (f.message || ""),
    ])), "No failures.", 4);

    $("updated").textContent = new Date(stats.at).toLocaleTimeString([], { hour12: false });
  }

  function renderChart(minutes) {
    const labels = minutes.map((m) => new Date(m.t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hour12: false }));
    const ok = minutes.map((m) => m.ok);
    const failed = minutes.map((m) => m.failed);
    const p50 = minutes.map((m) => m.p50_ms);
    const p95 = minutes.map((m) => m.p95_ms);
    if (!window.Chart) return;
    if (chart) {
      chart.data.labels = labels;
      [ok, failed, p50, p95].forEach((d, i) => { chart.data.datasets[i].data = d; });
      chart.update("none");
      return;
    }
    chart = new window.Chart($("chart-steps"), {
      data: {
        labels: labels,
        datasets: [
          { type: "bar", label: "succeeded / min", data: ok, backgroundColor: "#86efac", stack: "steps", yAxisID: "y" },
          { type: "bar", label: "failed / min", data: failed, backgroundColor: "#fca5a5", stack: "steps", yAxisID: "y" },
          { type: "line", label: "p50 run time (ms)", data: p50, borderColor: "#2563eb", backgroundColor: "#2563eb",
            yAxisID: "ms", spanGaps: true, pointRadius: 1.5, tension: 0.2 },
          { type: "line", label: "p95 run time (ms)", data: p95, borderColor: "#d97706", backgroundColor: "#d97706",
            yAxisID: "ms", spanGaps: true, pointRadius: 1.5, tension: 0.2 },
        ],
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, interaction: { mode: "index", intersect: false },
        scales: {
          x: { stacked: true, ticks: { maxTicksLimit: 12 } },
          y: { stacked: true, beginAtZero: true, title: { display: true, text: "steps / min" } },
          ms: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "ms" } },
        },
      },
    });
  }

  // ---- Refreshing --------------------------------------------------------------------------------

  let lastFetch = 0;
  let timer = 0;
  let inFlight = false;

  function scheduleRefresh() {
    if (timer) return;
    const wait = Math.max(0, lastFetch + MIN_GAP_MS - Date.now());
    timer = setTimeout(refresh, wait);
  }

  async function refresh() {
    timer = 0;
    if (inFlight) { scheduleRefresh(); return; }
    inFlight = true;
    lastFetch = Date.now();
    try {
      const r = await fetch(STATS_URL, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      const data = await r.json();
      if (!r.ok) throw new Error(data.message || r.statusText);
      render(data);
    } catch (err) {
      $("updated").textContent = "failed: " + err.message;
    } finally {
      inFlight = false;
    }
  }

  let retryMs = 500;
  let socketUp = false;
  function connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/dashboard/");
    const conn = $("conn");
    ws.onmessage = (msg) => {
      const data = JSON.parse(msg.data);
      if (data.type === "hello") {
        socketUp = true;
        retryMs = 500;
        conn.dataset.state = "live";
        conn.textContent = "live";
        scheduleRefresh();
      } else if (data.type === "changes") {
        scheduleRefresh();
      } else if (data.type === "error") {
        conn.dataset.state = "refused";
        conn.textContent = data.message;
      }
    };
    ws.onclose = (e) => {
      socketUp = false;
      if (e.code >= 4400 && e.code < 4500) return;
      conn.dataset.state = "offline";
      conn.textContent = "reconnecting…";
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 5000);
    };
  }

  render(JSON.parse($("dashboard-stats").textContent));
  connect();
  setInterval(() => { scheduleRefresh(); }, REFRESH_MS);
  // Without the socket, poll faster so the page never goes stale.
  setInterval(() => { if (!socketUp) scheduleRefresh(); }, 3000);
  window.steadyflowDashboard = { refresh: refresh, render: render };
})();
