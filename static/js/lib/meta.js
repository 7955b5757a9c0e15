/* What the server knows and the scripts need: statuses, event kinds and the event -> state tables,
 * status colours, the compensation prefix (dashboard/pages/meta.py). base.html renders it in a `json_script`
 * block named `sf-meta`; GET /api/meta serves the same document. */

import { jsonScript } from "./dom.js";

let cached = null;

export function meta() {
  if (!cached) {
    cached = jsonScript("sf-meta");
    if (!cached) throw new Error("the page has no sf-meta block (templates/base.html renders it)");
  }
  return cached;
}
