/* Formatting shared by the pages: times, durations, ages. */

/** "2026-12-01 15:04:05 UTC": the pages' one date format (dashboard/templatetags/timestamps.py). */
export function stamp(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso || "");
  return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

/** "14:03:07.123" (local time, 24 h, milliseconds). */
export function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

/** "812.0 ms" or "1.24 s"; "—" for none. */
export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Number(ms).toFixed(1) + " ms";
}

/** "12 s ago", "5 min ago", "3 h ago" relative to `now` (ms since the epoch). */
export function ago(iso, now) {
  if (!iso) return "—";
  const s = Math.max(0, ((now === undefined ? Date.now() : now) - Date.parse(iso)) / 1000);
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}
