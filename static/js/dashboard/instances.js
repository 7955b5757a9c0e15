/* The instance list keeps itself current: on the first page, its rows are fetched again (the same
 * filters, `?format=json`) when the `dashboard` group reports changes (at most two notices a second)
 * and every REFRESH_MS anyway, at most one request per MIN_GAP_MS. Later pages stay as they are (the
 * rows would shift under the reader). */

import { byId as $, el, replaceChildren } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";
import { openSocket } from "../lib/socket.js";

const REFRESH_MS = 5000;
const MIN_GAP_MS = 1000;
const script = $("instances-script");
const live = $("list-live");

function row(i) {
  return el("tr", {},
    el("td", {}, el("a", { href: i.url }, String(i.id))),
    el("td", {}, `${i.workflow} v${i.version}`, i.parent ? [el("br"), el("small", { class: "muted parent-link" },
      "child of ", el("a", { href: `/instances/${i.parent}/` }, `#${i.parent}`))] : null),
    el("td", {}, el("span", { class: "badge status-" + i.status }, i.status)),
    el("td", {}, i.reason),
    el("td", {}, i.created_at),
    el("td", {}, i.finished_at || "—"),
    el("td", {}, el("code", { class: "trace" }, i.trace_id)));
}

let lastFetch = 0;
let timer = 0;
let inFlight = false;

function schedule() {
  if (timer) return;
  timer = setTimeout(refresh, Math.max(0, lastFetch + MIN_GAP_MS - Date.now()));
}

async function refresh() {
  timer = 0;
  if (inFlight) { schedule(); return; }
  inFlight = true;
  lastFetch = Date.now();
  const params = new URLSearchParams(location.search);
  params.set("format", "json");
  try {
    const data = await getJSON(location.pathname + "?" + params.toString());
    const body = document.querySelector("#instances tbody");
    // An empty answer keeps the server's empty-state row (it says why, with links).
    if (data.instances.length) replaceChildren(body, data.instances.map(row));
    $("instance-count").textContent = `${data.count} instance${data.count === 1 ? "" : "s"}`;
    live.dataset.state = "live";
    live.textContent = "live";
    live.title = "Updated " + new Date().toLocaleTimeString([], { hour12: false });
  } catch (err) {
    live.dataset.state = "offline";
    live.textContent = "not updating: " + err.message;
  } finally {
    inFlight = false;
  }
}

if (script.dataset.page === "1") {
  openSocket("/ws/dashboard/", { maxRetryMs: 5000, onMessage: (data) => { if (data.type === "changes") schedule(); } });
  setInterval(schedule, REFRESH_MS);
  schedule();
} else {
  live.dataset.state = "offline";
  live.textContent = "page " + script.dataset.page + ": not refreshed";
}
window.steadyflowInstances = { refresh };
