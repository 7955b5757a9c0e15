/* The decision panel, the same on the review page and the instance page: why the item is open, the
 * form its reason calls for (decision-form.js) and its buttons; it posts the decision to the
 * instance's review API (lib/api.js) and then calls `onDecided`.
 *
 *   const panel = createDecisionPanel({ why, form, buttons, msg, canDecide, nodes, decideUrl, onDecided });
 *   panel.show(review, context);   // review: {id, reason, node, details, why}; none hides nothing
 *   bindShortcuts(panel, { next }) // a: approve, r: reject, n: next (outside text fields)
 *
 * After a decision the form goes back to its defaults and its buttons stay disabled until another
 * item is shown, so a second click cannot apply the same values again.
 */

import { el, replaceChildren } from "../lib/dom.js";
import { postJSON } from "../lib/api.js";
import { collectDecision, decisionSpec, defaults, explain } from "./decision-form.js";

// The ids the instance page always had (tests and muscle memory): the rest are rv-<name>.
const IDS = { extra_transitions: "rv-transitions", extra_budget_usd: "rv-budget", goto: "rv-goto", note: "rv-note" };
export const fieldId = (name) => IDS[name] || "rv-" + name.replace(/[^a-z0-9_-]/gi, "-");

function control(f) {
  const id = fieldId(f.name);
  const common = { id, name: f.name, "aria-describedby": f.help ? id + "-help" : null };
  if (f.type === "select") {
    return el("select", common, f.options.map((o) => el("option", { value: o.value }, o.label)));
  }
  if (f.type === "checkbox") return el("input", Object.assign({ type: "checkbox" }, common));
  if (f.type === "json" || f.type === "textarea") {
    return el("textarea", Object.assign({ rows: f.rows || 3, class: f.type === "json" ? "mono" : null,
      placeholder: f.placeholder || null, spellcheck: "false" }, common));
  }
  const numeric = f.type === "integer" || f.type === "number";
  return el("input", Object.assign({ type: numeric ? "number" : "text", min: f.min, max: f.max,
    step: f.type === "integer" ? "1" : f.step, placeholder: f.placeholder || null,
    required: f.required || null }, common));
}

export function createDecisionPanel(opts) {
  const { canDecide, nodes, decideUrl, onDecided } = opts;
  let spec = null;
  let current = null; // the review shown
  let context = {};
  let decided = null; // the id of the item just decided: its buttons stay off
  let busy = false;
  const inputs = {};

  function setValues(values) {
    spec.fields.forEach((f) => {
      const input = inputs[f.name];
      if (f.type === "checkbox") input.checked = Boolean(values[f.name]);
      else input.value = values[f.name] === undefined ? "" : values[f.name];
    });
  }

  function values() {
    const out = {};
    spec.fields.forEach((f) => {
      const input = inputs[f.name];
      out[f.name] = f.type === "checkbox" ? input.checked : input.value;
    });
    return out;
  }

  function say(text, isError) {
    opts.msg.textContent = text;
    opts.msg.classList.toggle("error", Boolean(isError));
  }

  function renderWhy(review) {
    const rows = explain(review.reason, review.why || Object.assign({}, review.details, { node: review.node }));
    replaceChildren(opts.why, el("dl", { class: "facts why" }, rows.map((r) => [
      el("dt", {}, r.label),
      el("dd", { dataset: { fact: r.label.toLowerCase() } }, r.path ? r.path.map((p, i) => [
        i ? " → " : null,
        el("span", { class: "path-step", dataset: { node: p.node, visit: p.visit } }, p.node,
          p.visit > 1 ? el("sup", { class: "visit" }, "×" + p.visit) : null)]) : r.text),
    ])));
  }

  function renderForm() {
    Object.keys(inputs).forEach((k) => delete inputs[k]);
    const rows = spec.fields.map((f) => {
      const input = control(f);
      inputs[f.name] = input;
      return el("label", { class: ["field", f.wide ? "wide" : "", f.primary ? "primary" : "", f.type].join(" "),
        dataset: { field: f.name } },
      el("span", { class: "field-label" }, f.label, f.required ? el("abbr", { title: "required" }, " *") : null),
      input,
      f.help ? el("span", { class: "field-help", id: fieldId(f.name) + "-help" }, f.help) : null,
      el("span", { class: "field-error", hidden: true }));
    });
    replaceChildren(opts.form, rows);
    setValues(defaults(spec));
    replaceChildren(opts.buttons, spec.actions.map((a) => el("button", {
      type: "button", class: a.kind || null, dataset: { action: a.action }, title: a.key ? "shortcut: " + a.key : null,
      onclick: () => decide(a.action) }, a.label, a.key ? el("kbd", {}, a.key) : null)), opts.msg);
  }

  function showErrors(errors) {
    opts.form.querySelectorAll("[data-field]").forEach((label) => {
      const err = label.querySelector(".field-error");
      const text = errors[label.dataset.field];
      err.hidden = !text;
      err.textContent = text || "";
      label.classList.toggle("invalid", Boolean(text));
    });
  }

  function setEnabled(on) {
    opts.buttons.querySelectorAll("button[data-action]").forEach((b) => { b.disabled = !on; });
  }

  /** Show a review item (null: nothing open). A new item rebuilds the form; the same one keeps it. */
  function show(review, ctx) {
    if (!review) { current = null; return; }
    renderWhy(review);
    if (current && current.id === review.id && spec) return;
    current = review;
    context = ctx || {};
    const details = review.details || {};
    spec = decisionSpec(review.reason, { inputs: (review.why && review.why.inputs) || details.inputs, nodes, context });
    renderForm();
    setEnabled(canDecide && decided !== review.id);
    say("");
  }

  function reset() {
    if (!spec) return;
    setValues(defaults(spec));
    showErrors({});
  }

  async function decide(action) {
    if (!current || !canDecide || busy || decided === current.id) return null;
    const a = spec.actions.find((x) => x.action === action);
    if (!a) return null;
    const { body, errors } = collectDecision(spec, action, values(), { item: current.id, originalContext: context });
    showErrors(errors);
    if (Object.keys(errors).length) { say("Not sent: " + Object.values(errors)[0], true); return null; }
    if (a.confirm && !window.confirm(a.confirm)) return null;
    busy = true;
    setEnabled(false);
    say("…");
    try {
      const data = await postJSON(decideUrl, body);
      decided = current.id;
      reset();
      say("Decided: " + body.action.replace("_", " "));
      if (onDecided) onDecided(data, body);
      return data;
    } catch (err) {
      say(err.message, true);
      setEnabled(true);
      return null;
    } finally {
      busy = false;
    }
  }

  return { show, reset, decide, current: () => current, spec: () => spec };
}

/** Keyboard shortcuts, outside text fields and without modifier keys: a approve, r reject, n next. */
export function bindShortcuts(panel, { next } = {}) {
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const t = e.target;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
    if (e.key === "a") { e.preventDefault(); panel.decide("approve"); }
    else if (e.key === "r") { e.preventDefault(); panel.decide("reject"); }
    else if (e.key === "n" && next) { e.preventDefault(); next(); }
  });
}
