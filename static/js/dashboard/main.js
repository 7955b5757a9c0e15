/* The operations dashboard: figures from GET /api/dashboard, refreshed when the `dashboard` group
 * reports changes (the consumer coalesces events into at most two messages a second) and every
 * REFRESH_MS anyway (workers come and go without events). At most one request per MIN_GAP_MS. */

import { byId as $, el, jsonScript, replaceChildren } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";
import { ago, fmtMs as ms } from "../lib/format.js";
import { meta } from "../lib/meta.js";
import { openSocket } from "../lib/socket.js";

const script = $("dashboard-script");
const STATS_URL = script.dataset.statsUrl;
const LIST_URL = script.dataset.instancesUrl;
const REFRESH_MS = 10000;
const MIN_GAP_MS = 1000;

const link = (href, text) => el("a", { href }, text);

function row(cells) {
return el("tr", {}, cells.map((c) => el("td", {}, c instanceof Node ? c : (c === null || c === undefined ? "—" : String(c)))));
}

function fill(tbody, rows, emptyText, columns) {
if (!rows.length) {
  replaceChildren(tbody, el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText)));
  return;
}
replaceChildren(tbody, rows);
}

// ---- Rendering ---------------------------------------------------------------------------------

let chart = null;

function render(stats) {
  replaceChildren($("counts"), meta().dashboardOrder.map((status) => el("a", { href: LIST_URL + "?status=" + status,
    class: "tile status-" + status, dataset: { status } },
  el("span", { class: "n" }, stats.counts[status] || 0), el("span", { class: "label" }, status))));

  const hour = stats.steps.hour;
  $("hour-rate").textContent = hour.per_minute;
  $("hour-ok").textContent = hour.ok;
  $("hour-failed").textContent = hour.failed;
  $("hour-p50").textContent = ms(hour.p50_ms);
  $("hour-p95").textContent = ms(hour.p95_ms);
  renderChart(stats.steps.minutes);

  $("reviews-open").textContent = stats.reviews.open;
  // Each row opens the item (why, context, decision form), not the instance.
  fill($("reviews"), stats.reviews.latest.map((r) => row([
    link("/review/" + r.id + "/", "#" + r.instance), r.workflow,
    link("/review/" + r.id + "/", r.reason.replace(/_/g, " ")), ago(r.created_at),
  ])), "No open review items.", 4);

  fill($("breakers"), stats.breakers.map((b) => {
    const state = el("span", { class: "badge breaker-" + b.state }, b.state.replace("_", "-"));
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
  // The newcomer's card (templates/dashboard/home.html) becomes the plain Examples card once something
  // has run: the examples stay one click from running again.
  const firstRun = $("first-run");
  if (firstRun && Object.values(stats.counts).some((n) => n > 0)) {
    firstRun.querySelectorAll(".newcomer-only").forEach((e) => { e.hidden = true; });
    $("first-run-title").textContent = "Examples";
  }
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
        // Headroom above the tallest bar and line (grace): nothing is drawn against the top edge.
        y: { stacked: true, beginAtZero: true, grace: "10%", title: { display: true, text: "steps / min" } },
        ms: { position: "right", beginAtZero: true, grace: "10%", grid: { drawOnChartArea: false },
          title: { display: true, text: "ms" } },
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
    render(await getJSON(STATS_URL));
  } catch (err) {
    $("updated").textContent = "failed: " + err.message;
  } finally {
    inFlight = false;
  }
}

let socketUp = false;
const conn = $("conn");
const socket = openSocket("/ws/dashboard/", {
  maxRetryMs: 5000,
  onState: (state, text) => {
    socketUp = false;
    if (state === "connecting") return;
    conn.dataset.state = state;
    conn.textContent = text;
  },
  onMessage: (data) => {
    if (data.type === "hello") {
      socketUp = true;
      conn.dataset.state = "live";
      conn.textContent = "live";
      scheduleRefresh();
    } else if (data.type === "changes") {
      scheduleRefresh();
    } else if (data.type === "error") {
      conn.dataset.state = "refused";
      conn.textContent = data.message;
    }
  },
});

render(jsonScript("dashboard-stats"));
setInterval(() => { scheduleRefresh(); }, REFRESH_MS);
// Without the socket, poll faster so the page never goes stale.
setInterval(() => { if (!socketUp) scheduleRefresh(); }, 3000);
window.steadyflowDashboard = { refresh, render, socket };
