/* The instance's header and what an operator can do: the status badge, the figures (loops, tokens,
 * cost, error), cancel and retry, and the review panel of a halted instance (workflows/review.py). */

import { byId as $, el } from "../lib/dom.js";
import { getJSON, postJSON } from "../lib/api.js";

export function createActions(page) {
  const { cfg } = page;
  let factsTimer = 0;

  /** POST an action; its outcome goes to `msgEl`. Returns the answer, or null when refused or declined. */
  async function act(url, body, msgEl, confirmText) {
    if (confirmText && !window.confirm(confirmText)) return null;
    msgEl.textContent = "…";
    msgEl.classList.remove("error");
    try {
      const data = await postJSON(url, body || {});
      msgEl.textContent = "done";
      setTimeout(() => { if (msgEl.textContent === "done") msgEl.textContent = ""; }, 2500);
      page.catchUp();
      return data;
    } catch (err) {
      msgEl.textContent = err.message;
      msgEl.classList.add("error");
      return null;
    }
  }

  function renderButtons() {
    const live = page.live();
    const status = live.status;
    const op = cfg.canOperate;
    $("btn-cancel").hidden = !op || !["running", "waiting", "halted", "pending"].includes(status);
    const failedNode = Object.keys(live.nodes).some((id) => live.nodes[id].state === "failed");
    $("btn-retry").hidden = !op || status !== "failed" || !failedNode;
    if (page.inspector.selected()) page.inspector.renderActions();
  }

  function renderStatus() {
    const status = page.live().status;
    const badge = $("inst-status");
    if (badge.dataset.status === status) return;
    badge.className = "badge status-" + status;
    badge.dataset.status = status;
    badge.textContent = status;
    renderButtons();
  }

  async function refreshFacts() {
    factsTimer = 0;
    try {
      const inst = await getJSON(cfg.urls.instance);
      $("inst-loop").textContent = inst.loop_count;
      if (inst.max_transitions !== undefined) $("inst-max").textContent = inst.max_transitions;
      $("inst-tokens").textContent = inst.tokens;
      $("inst-cost").textContent = Number(inst.cost_usd).toFixed(6);
      const err = $("inst-error");
      if (inst.error && inst.error.message) {
        err.hidden = false;
        err.textContent = (inst.reason ? inst.reason + ": " : "") + inst.error.message;
      } else {
        err.hidden = true;
      }
      renderButtons();
    } catch (e) { /* the next event retries */ }
  }

  function refreshFactsSoon() {
    if (!factsTimer) factsTimer = setTimeout(refreshFacts, 600);
  }

  const gotoSel = $("rv-goto");
  (cfg.graph.nodes || []).filter((n) => n.type !== "start")
    .forEach((n) => gotoSel.appendChild(el("option", { value: n.id }, n.id)));

  function renderReview() {
    const live = page.live();
    const item = live.status === "halted" ? live.review : null;
    const box = $("review");
    box.hidden = !item;
    if (!item) return;
    $("review-reason").textContent = (item.reason || "review").replace(/_/g, " ");
    $("review-message").textContent = (item.details && item.details.message) || "";
    $("review-readonly").hidden = cfg.canDecide;
    const link = $("review-link");
    link.hidden = !(cfg.urls.reviewDetail && item.id);
    if (!link.hidden) link.href = cfg.urls.reviewDetail.replace("{id}", item.id);
    box.querySelectorAll("button[data-action], .review-form").forEach((b) => { b.hidden = !cfg.canDecide; });
  }

  $("btn-cancel").addEventListener("click", () => act(cfg.urls.cancel, {}, $("action-msg"),
    "Cancel instance " + cfg.instance.id + "? Its open steps are cancelled."));
  $("btn-retry").addEventListener("click", () => act(cfg.urls.retry, {}, $("action-msg")));
  $("review").querySelectorAll("button[data-action]").forEach((b) => {
    b.addEventListener("click", () => {
      const action = b.dataset.action;
      const item = page.live().review || {};
      const body = { action, note: $("rv-note").value, item: item.id || null };
      const extra = $("rv-transitions").value;
      const budget = $("rv-budget").value;
      if (extra !== "") body.extra_transitions = Number(extra);
      if (budget !== "") body.extra_budget_usd = budget;
      if (action === "reroute") body.goto = gotoSel.value;
      const ask = action === "reject" ? "Reject: the instance fails (and compensates). Continue?"
        : action === "cancel" ? "Cancel this instance?" : null;
      act(cfg.urls.review, body, $("review-msg"), ask);
    });
  });

  return { act, renderButtons, renderStatus, renderReview, refreshFactsSoon };
}
