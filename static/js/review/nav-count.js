/* The navigation's inbox badge: the number of open review items, from GET /api/reviews, refreshed
 * when the dashboard socket reports committed changes (dashboard/live/relay.py coalesces them to at
 * most two messages a second) and polled only while that socket is down. */

import { byId, el } from "../lib/dom.js";
import { getJSON } from "../lib/api.js";
import { debounce } from "../lib/format.js";
import { openSocket } from "../lib/socket.js";

const badge = byId("nav-review-count");
const POLL_MS = 15000;

async function refresh() {
  try {
    const data = await getJSON(badge.dataset.url + "?limit=0");
    // The number, then words for screen readers ("Review 3 open"): an aria-label on a span is not read.
    badge.replaceChildren(String(data.open), el("span", { class: "visually-hidden" }, " open"));
    badge.dataset.count = String(data.open);
    badge.hidden = false;
    badge.classList.toggle("zero", data.open === 0);
    badge.title = data.open + " open review item(s)";
  } catch (e) { /* the next change or poll tries again */ }
}

if (badge) {
  const soon = debounce(refresh, 250);
  // One request per page, not two: the socket's hello (sent once it is subscribed, so no change is
  // missed after it) asks for the count; only when no hello comes soon does the page ask by itself.
  // Every page loads this script, and each request waited its turn behind the page's own.
  let asked = false;
  const first = () => { if (!asked) { asked = true; refresh(); } };
  const sock = openSocket("/ws/dashboard/", {
    onMessage: (data, s) => {
      if (data.type === "hello") { s.connected = true; if (asked) soon(); else first(); }
      else if (data.type === "changes") soon();
    },
  });
  setTimeout(first, 1000);
  setInterval(() => { if (!sock.connected && !sock.stopped) refresh(); }, POLL_MS);
}
