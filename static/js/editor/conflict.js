/* A save conflict (the 409 of POST .../versions: `latest`, `their_changes`, `your_changes`) as the
 * save dialog shows it before "Save anyway": who saved what, when, and what saving anyway replaces.
 * Pure (tests/js/conflict.test.mjs). */

import { stamp } from "../lib/format.js";
import { diffRows } from "./model.js";

export { stamp };  // the one date format, from lib/format.js

/**
 * {headline, message, theirs: rows, yours: rows, theirsKnown} (rows as model.js diffRows makes them).
 * `base`: the version the editor started from (null for a workflow it saw unsaved).
 */
export function conflictView(data, base) {
  const latest = data && data.latest;
  if (!latest) return { headline: "Another version was saved meanwhile.", message: "", theirs: [], yours: [], theirsKnown: false };
  const who = latest.created_by ? ` by ${latest.created_by}` : "";
  const since = base === null || base === undefined ? "" : ` (you started from v${base})`;
  return {
    headline: `v${latest.number} was saved${who} at ${stamp(latest.created_at)}${since}.`,
    message: latest.message || "",
    theirsKnown: Boolean(data.their_changes),
    theirs: data.their_changes ? diffRows(data.their_changes) : [],
    yours: data.your_changes ? diffRows(data.your_changes) : [],
  };
}
