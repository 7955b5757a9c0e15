/* The instance's header and what an operator can do: the status badge, the figures (loops, tokens,
 * cost, error), cancel and retry, and the decision panel of an open review item, halt or human task
 * (review/panel.js, the same as the review page's; workflows/operators/review.py decides).
 *
 * The badge shows the server's status while the page stands at the event the server had written last
 * when it answered (GET /api/instances/<id>: `event_seq`; every batch of events asks again): the events
 * alone cannot tell, e.g., whether another human task still waits after one is answered. */

import { byId as $ } from "../lib/dom.js";
import { getJSON, postJSON } from "../lib/api.js";
import { bindShortcuts, createDecisionPanel } from "../review/panel.js";

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
    // Designers cancel the instances they started (the server's rule: operations.cancel_refusal).
    $("btn-cancel").hidden = !cfg.canCancel || !["running", "waiting", "halted", "pending"].includes(status);
    const failedNode = Object.keys(live.nodes).some((id) => live.nodes[id].state === "failed");
    $("btn-retry").hidden = !op || status !== "failed" || !failedNode;
    if (page.inspector.selected()) page.inspector.renderActions();
  }

  let server = null; // {status, seq}: the instance as GET /api/instances/<id> last answered

  function shownStatus() {
    const live = page.live();
    // At the very event the server answered for: a later event is newer than that answer.
    return server && live.seq === server.seq ? server.status : live.status;
  }

  function renderStatus() {
    const status = shownStatus();
    const badge = $("inst-status");
    if (badge.dataset.status === status) return;
    badge.className = "badge status-" + status;
    badge.dataset.status = status;
    badge.textContent = status;
    if (page.onStatus) page.onStatus(status);
    renderButtons();
  }

  async function refreshFacts() {
    factsTimer = 0;
    try {
      const inst = await getJSON(cfg.urls.instance);
      if (inst.event_seq !== undefined) server = { status: inst.status, seq: inst.event_seq };
      renderStatus();
      renderReview();
      if (page.onInstance) page.onInstance(inst);
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

  const graphNodes = cfg.graph.nodes || [];
  const panel = createDecisionPanel({
    why: $("review-why"), form: $("rv-form"), buttons: $("rv-buttons"), msg: $("review-msg"),
    canDecide: cfg.canDecide, nodes: graphNodes, decideUrl: cfg.urls.review,
    onDecided: () => { page.catchUp(); refreshFactsSoon(); },
  });
  if (cfg.canDecide) bindShortcuts(panel);

  /** The open item with what the panel needs: a human task opened since the page loaded carries only
   * its prompt in the event; its declared inputs are the node's (the graph). */
  function withInputs(item) {
    // The page's first item comes with the server's `why` (breaker state, budget figures): keep it.
    if (cfg.review && cfg.review.id === item.id && !item.why) item = Object.assign({}, item, { why: cfg.review.why });
    if (item.reason !== "human_task" || (item.details && item.details.inputs)) return item;
    const node = graphNodes.find((n) => n.id === item.node) || {};
    return Object.assign({}, item, { details: Object.assign({}, item.details,
      { inputs: (node.config && node.config.inputs) || {} }) });
  }

  function renderReview() {
    const live = page.live();
    const status = shownStatus();
    const item = live.review && ["halted", "waiting"].includes(status) ? live.review : null;
    const box = $("review");
    box.hidden = !item;
    if (!item) return;
    const human = item.reason === "human_task";
    $("review-title").textContent = human ? "Waiting for an answer" : "Halted";
    $("review-reason").textContent = (item.reason || "review").replace(/_/g, " ");
    panel.show(withInputs(item), page.context());
    $("review-readonly").hidden = cfg.canDecide;
    const link = $("review-link");
    link.hidden = !(cfg.urls.reviewDetail && item.id);
    if (!link.hidden) link.href = cfg.urls.reviewDetail.replace("{id}", item.id);
  }

  $("btn-cancel").addEventListener("click", () => act(cfg.urls.cancel, {}, $("action-msg"),
    "Cancel instance " + cfg.instance.id + "? Its open steps are cancelled."));
  $("btn-retry").addEventListener("click", () => act(cfg.urls.retry, {}, $("action-msg")));

  return { act, renderButtons, renderStatus, renderReview, refreshFactsSoon, refreshFacts, panel };
}
