/* The review inbox's bulk decision: tick open items (or all on the page), then Approve or Reject them
 * with one confirmation (POST /api/reviews/decide; each item is decided as from its own page). */

import { byId as $ } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { confirmText, resultText, selectedText } from "./bulk-text.js";

const boxes = () => Array.from(document.querySelectorAll(".rv-select"));
const chosen = () => boxes().filter((b) => b.checked).map((b) => Number(b.value));

function refresh() {
  const n = chosen().length;
  $("rv-bulk-count").textContent = selectedText(n);
  $("rv-bulk-approve").disabled = !n;
  $("rv-bulk-reject").disabled = !n;
  const all = $("rv-select-all");
  all.checked = n > 0 && n === boxes().length;
  all.indeterminate = n > 0 && n < boxes().length;
}

async function decide(action) {
  const items = chosen();
  if (!items.length || !window.confirm(confirmText(action, items.length))) return;
  const result = $("rv-bulk-result");
  $("rv-bulk-approve").disabled = $("rv-bulk-reject").disabled = true;
  result.textContent = "Deciding…";
  try {
    const answer = await request("POST", $("rv-bulk").dataset.url, { items, action });
    answer.decided.forEach((id) => {
      const row = document.querySelector(`tr[data-item="${id}"]`);
      if (row) row.remove(); // decided: no longer open
    });
    result.textContent = resultText(answer);
    result.className = "rv-bulk-result " + (answer.failed.length ? "bad" : "good");
  } catch (err) {
    result.textContent = err.message;
    result.className = "rv-bulk-result bad";
  }
  refresh();
}

$("rv-select-all").disabled = !boxes().length;
$("rv-select-all").addEventListener("change", (e) => {
  boxes().forEach((b) => { b.checked = e.target.checked; });
  refresh();
});
document.querySelector(".review-list").addEventListener("change", (e) => {
  if (e.target.classList.contains("rv-select")) refresh();
});
$("rv-bulk-approve").addEventListener("click", () => decide("approve"));
$("rv-bulk-reject").addEventListener("click", () => decide("reject"));
refresh();
