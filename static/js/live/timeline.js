/* The timeline (every event, filtered by kind, node and text; a click travels there) and time travel
 * (the slider redraws the graph as it stood after any event). */

import { byId as $, el, replaceChildren } from "../lib/dom.js";
import { fmtMs, fmtTime } from "../lib/format.js";
import { EVENT_FILTERS } from "./reducer.js";

/** One line about an event's payload for the timeline. */
export function summary(ev, edgeName) {
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

export function createTimeline(page) {
  const { cfg, log, reducer } = page;
  const tbody = document.querySelector("#timeline tbody");
  const nodeSel = $("tl-node");
  (cfg.graph.nodes || []).forEach((n) => nodeSel.appendChild(el("option", { value: n.id }, n.id)));
  const travel = $("travel");
  let travelAt = null; // null: live; otherwise how many events are applied
  let rendered = 0;

  const edgeName = (i) => {
    const e = (cfg.graph.edges || [])[i];
    return e ? e.source + "→" + e.target : "#" + i;
  };

  function matches(ev) {
    const kind = $("tl-kind").value;
    if (kind && !EVENT_FILTERS[kind](ev)) return false;
    const node = nodeSel.value;
    if (node && reducer.baseNode(ev.node) !== node) return false;
    const text = $("tl-text").value.trim().toLowerCase();
    if (text && (ev.type + " " + ev.node + " " + summary(ev, edgeName)).toLowerCase().indexOf(text) < 0) return false;
    return true;
  }

  function rowFor(ev) {
    const t0 = log.events.length ? Date.parse(log.events[0].at) : Date.parse(ev.at);
    return el("tr", { class: "ev ev-" + ev.type, dataset: { seq: ev.seq },
      title: "Show the graph as it stood after this event",
      onclick: () => setTravel(log.events.findIndex((x) => x.seq === ev.seq) + 1) },
    [String(ev.seq), fmtTime(ev.at), ((Date.parse(ev.at) - t0) / 1000).toFixed(3)].map((v) => el("td", {}, v)),
    el("td", {}, el("span", { class: "evtype" }, ev.type)),
    el("td", {}, ev.node || ""),
    el("td", { class: "details" }, summary(ev, edgeName)));
  }

  function rerender() {
    replaceChildren(tbody);
    rendered = 0;
    append();
  }

  function append() {
    const frag = document.createDocumentFragment();
    for (; rendered < log.events.length; rendered++) {
      const ev = log.events[rendered];
      if (matches(ev)) frag.appendChild(rowFor(ev));
    }
    tbody.appendChild(frag);
    $("tl-count").textContent = tbody.children.length + " of " + log.events.length + " events";
    renderMarker();
  }

  function renderMarker() {
    const current = travelAt === null ? null : (log.events[travelAt - 1] || {}).seq;
    tbody.querySelectorAll("tr.current").forEach((r) => r.classList.remove("current"));
    if (current) {
      const row = tbody.querySelector("tr[data-seq='" + current + "']");
      if (row) row.classList.add("current");
    }
  }

  /** Show the graph after `count` events (null or past the end: live). */
  function setTravel(count) {
    const n = log.events.length;
    if (count === null || count >= n) {
      travelAt = null;
      travel.value = String(n);
      $("travel-banner").hidden = true;
      $("travel-label").textContent = "live · " + n + " events";
      page.canvas.draw(page.live());
    } else {
      travelAt = Math.max(0, count);
      travel.value = String(travelAt);
      const ev = log.events[travelAt - 1];
      $("travel-banner").hidden = false;
      $("travel-seq").textContent = ev ? "#" + ev.seq + " " + ev.type + (ev.node ? " " + ev.node : "") : "(none)";
      $("travel-label").textContent = travelAt + " / " + n + (ev ? " · " + fmtTime(ev.at) : "");
      page.canvas.draw(reducer.replay(log.events, travelAt));
    }
    renderMarker();
  }

  /** New events were applied: follow them when live, otherwise only extend the slider. */
  function onEvents() {
    travel.max = String(log.events.length);
    if (travelAt === null) setTravel(null);
    else $("travel-label").textContent = travelAt + " / " + log.events.length;
    append();
  }

  travel.addEventListener("input", () => setTravel(Number(travel.value)));
  $("btn-live").addEventListener("click", () => setTravel(null));
  $("btn-step-back").addEventListener("click", () => setTravel((travelAt === null ? log.events.length : travelAt) - 1));
  $("btn-step-fwd").addEventListener("click", () => { if (travelAt !== null) setTravel(travelAt + 1); });
  ["tl-kind", "tl-node"].forEach((id) => $(id).addEventListener("change", rerender));
  $("tl-text").addEventListener("input", rerender);

  return { setTravel, onEvents, travelAt: () => travelAt };
}
