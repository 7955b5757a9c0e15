/* The daily chart: finished instances per day (by final status) and p50/p95 step run time over the
 * last 30 days, from GET /api/dashboard/daily. Days whose history retention deleted come from the
 * daily rollup, so the bars do not change when the history goes (docs/operating-retention.md).
 * Fetched once when the page opens: a day's figures change slowly. */

import { byId as $ } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";

const section = $("daily");
const DAILY_URL = section.dataset.url;

function draw(days) {
  const total = (d) => Object.values(d.instances).reduce((a, b) => a + b, 0);
  const finished = days.reduce((sum, d) => sum + total(d), 0);
  $("daily-finished").textContent = String(finished);
  $("daily-steps").textContent = String(days.reduce((sum, d) => sum + d.steps_ok + d.steps_failed, 0));
  section.dataset.loaded = String(days.length);
  if (!window.Chart) return;
  const count = (status) => days.map((d) => d.instances[status] || 0);
  new window.Chart($("chart-daily"), {
    data: {
      labels: days.map((d) => d.day.slice(5)),
      datasets: [
        { type: "bar", label: "completed", data: count("completed"), backgroundColor: "#86efac", stack: "i", yAxisID: "y" },
        { type: "bar", label: "failed", data: count("failed"), backgroundColor: "#fca5a5", stack: "i", yAxisID: "y" },
        { type: "bar", label: "cancelled / compensated", data: days.map((d) => (d.instances.cancelled || 0) + (d.instances.compensated || 0)),
          backgroundColor: "#d1d5db", stack: "i", yAxisID: "y" },
        { type: "line", label: "p95 step run time (ms)", data: days.map((d) => d.step_p95_ms), borderColor: "#d97706",
          backgroundColor: "#d97706", yAxisID: "ms", spanGaps: true, pointRadius: 1.5 },
      ],
    },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, interaction: { mode: "index", intersect: false },
      scales: {
        x: { stacked: true, ticks: { maxTicksLimit: 10 } },
        // Headroom above the tallest bar (grace), as on the steps chart: its top is not the plot area's edge.
        y: { stacked: true, beginAtZero: true, grace: "10%", title: { display: true, text: "instances / day" } },
        ms: { position: "right", type: "logarithmic", grid: { drawOnChartArea: false }, title: { display: true, text: "ms" } },
      },
    },
  });
}

getJSON(DAILY_URL).then((body) => draw(body.days)).catch((err) => {
  section.dataset.loaded = "error";
  $("daily-finished").textContent = "unavailable";
  console.warn("daily figures unavailable", err);
});
