/* The decision form of a review item, pure: which fields and buttons a reason calls for, what the item
 * says about why it is open, and the request body a filled form makes (or what is wrong with it).
 *
 *   const spec = decisionSpec("human_task", { inputs, nodes, context });   // fields + actions
 *   const { body, errors } = collectDecision(spec, "approve", values);    // values: {name: raw}
 *   explain(reason, whyOrDetails)                                         // [{label, text, path}]
 *
 * No DOM: panel.js renders a spec with lib/dom.js, the unit tests (tests/js/decision-form.test.mjs)
 * call these directly. The server validates every decision again (workflows/operators/review.py decide): the
 * checks here only say what is wrong before a round trip.
 */

// Buttons: `key` is the keyboard shortcut (panel.js), `confirm` a question asked first.
const APPROVE = { action: "approve", label: "Approve and continue", key: "a", kind: "primary" };
const REJECT = { action: "reject", label: "Reject", key: "r", kind: "danger",
  confirm: "Reject: the instance fails (and compensates). Continue?" };
const CANCEL = { action: "cancel", label: "Cancel instance", kind: "danger", confirm: "Cancel this instance?" };
const RETRY = { action: "retry", label: "Retry the step" };
const REROUTE = { action: "reroute", label: "Continue from the chosen node", needs: "goto" };

const NOTE = { name: "note", label: "Note", type: "text", help: "why (kept in the audit)", wide: true };

// Grants per halt reason, the one the reason calls for first.
const GRANTS = {
  transitions: { name: "extra_transitions", label: "Extra transitions", type: "integer", min: 0,
    placeholder: "auto", help: "more node activations before the loop breaker halts again" },
  budget: { name: "extra_budget_usd", label: "Extra budget (USD)", type: "number", min: 0, step: "0.01",
    help: "added to the instance's cost budget" },
  tokens: { name: "extra_tokens", label: "Extra tokens", type: "integer", min: 0,
    help: "added to the instance's token budget" },
  ttl: { name: "extra_ttl_s", label: "Extra time (seconds)", type: "number", min: 1,
    help: "moves the instance's deadline" },
};

const HALT_GRANTS = {
  loop_breaker: ["transitions"],
  budget_exceeded: ["budget", "tokens"],
  ttl_expired: ["ttl"],
};

function goto(nodes) {
  return { name: "goto", label: "Next node", type: "select", help: "continue from this node (reroute)",
    options: [{ value: "", label: "— where it stopped —" }].concat(
      (nodes || []).filter((n) => n.type !== "start").map((n) => ({ value: n.id, label: n.id }))) };
}

/** One field per declared human-task input, from its JSON Schema. */
export function inputField(name, schema) {
  const s = schema || {};
  const field = { name: "input:" + name, input: name, label: s.title || name, help: s.description || "",
    required: true, schema: s };
  if (Array.isArray(s.enum)) {
    field.type = "select";
    field.options = s.enum.map((v) => ({ value: JSON.stringify(v), label: String(v) }));
    if (s.default !== undefined) field.default = JSON.stringify(s.default);
  } else if (s.type === "boolean") {
    field.type = "checkbox";
    field.default = s.default === undefined ? false : Boolean(s.default);
    field.required = false; // unchecked is an answer
  } else if (s.type === "integer" || s.type === "number") {
    field.type = s.type;
    if (s.minimum !== undefined) field.min = s.minimum;
    if (s.maximum !== undefined) field.max = s.maximum;
    if (s.type === "number") field.step = "any";
  } else if (s.type === "string") {
    field.type = s.maxLength !== undefined && s.maxLength > 200 ? "textarea" : "text";
  } else {
    field.type = "json"; // objects, arrays, unions, untyped: typed as JSON
  }
  if (field.default === undefined && s.default !== undefined) {
    field.default = field.type === "json" ? JSON.stringify(s.default) : String(s.default);
  }
  if (field.type === "json" && field.default === undefined && s.examples && s.examples.length) {
    field.placeholder = JSON.stringify(s.examples[0]);
  } else if (s.examples && s.examples.length) {
    field.placeholder = String(s.examples[0]);
  }
  return field;
}

/** The form a review item needs: {human, fields, actions}. */
export function decisionSpec(reason, { inputs, nodes, context } = {}) {
  if (reason === "human_task") {
    const fields = Object.entries(inputs || {}).map(([name, schema]) => inputField(name, schema));
    return { human: true, fields: fields.concat([NOTE]), actions: [APPROVE, REJECT] };
  }
  const grants = (HALT_GRANTS[reason] || []).concat(["transitions", "budget", "ttl"]
    .filter((g) => !(HALT_GRANTS[reason] || []).includes(g)));
  const fields = grants.map((g) => Object.assign({ primary: (HALT_GRANTS[reason] || []).includes(g) }, GRANTS[g]));
  fields.push(goto(nodes));
  fields.push({ name: "context", label: "Context (JSON)", type: "json", wide: true, rows: 6,
    default: JSON.stringify(context || {}, null, 2),
    help: "edit to continue with a different context (the audit keeps the difference)" });
  fields.push(NOTE);
  const actions = [APPROVE, REROUTE];
  if (["poison_step", "compensation_failed", "circuit_open", "ttl_expired"].includes(reason)) actions.push(RETRY);
  actions.push(REJECT, CANCEL);
  return { human: false, fields, actions };
}

/** The initial value of each field (what a reset puts back). */
export function defaults(spec) {
  const out = {};
  spec.fields.forEach((f) => {
    out[f.name] = f.default !== undefined ? f.default : f.type === "checkbox" ? false : "";
  });
  return out;
}

function typeOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** What is wrong with `value` against the small part of JSON Schema a human task's inputs use. */
export function checkValue(value, s) {
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    return "must be one of " + s.enum.map((e) => JSON.stringify(e)).join(", ");
  }
  if (s.type) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(value);
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) return "must be " + types.join(" or ");
  }
  if (typeof value === "number") {
    if (s.minimum !== undefined && value < s.minimum) return "must be at least " + s.minimum;
    if (s.maximum !== undefined && value > s.maximum) return "must be at most " + s.maximum;
  }
  if (typeof value === "string") {
    if (s.minLength !== undefined && value.length < s.minLength) return "must be at least " + s.minLength + " characters";
    if (s.maxLength !== undefined && value.length > s.maxLength) return "must be at most " + s.maxLength + " characters";
  }
  return null;
}

function parseField(f, raw) {
  if (f.type === "checkbox") return { value: Boolean(raw) };
  const text = raw === undefined || raw === null ? "" : String(raw).trim();
  if (text === "") return { empty: true };
  if (f.type === "integer" || f.type === "number") {
    const n = Number(text);
    if (!Number.isFinite(n)) return { error: "must be a number" };
    if (f.type === "integer" && !Number.isInteger(n)) return { error: "must be a whole number" };
    if (f.min !== undefined && n < f.min) return { error: "must be at least " + f.min };
    if (f.max !== undefined && n > f.max) return { error: "must be at most " + f.max };
    return { value: n };
  }
  if (f.type === "json" || (f.type === "select" && f.input)) {
    try { return { value: JSON.parse(text) }; } catch (e) { return { error: "is not valid JSON" }; }
  }
  return { value: f.type === "text" || f.type === "textarea" ? String(raw) : text };
}

/** The request body for POST /api/instances/<id>/review, or the errors by field name. */
export function collectDecision(spec, action, values, { item, originalContext } = {}) {
  const errors = {};
  const body = { action, note: String(values.note || "") };
  if (item !== undefined) body.item = item;
  if (spec.human) {
    if (action === "approve") {
      body.inputs = {};
      spec.fields.filter((f) => f.input).forEach((f) => {
        const got = parseField(f, values[f.name]);
        if (got.error) errors[f.name] = f.label + " " + got.error;
        else if (got.empty) errors[f.name] = f.label + " is required";
        else {
          const problem = checkValue(got.value, f.schema || {});
          if (problem) errors[f.name] = f.label + " " + problem;
          else body.inputs[f.input] = got.value;
        }
      });
    }
    return { body, errors };
  }
  if (action === "reject" || action === "cancel") return { body, errors };
  spec.fields.forEach((f) => {
    if (f.name === "note" || f.name === "goto" || f.name === "context") return;
    const got = parseField(f, values[f.name]);
    if (got.error) errors[f.name] = f.label + " " + got.error;
    else if (!got.empty) body[f.name] = f.name === "extra_budget_usd" ? String(got.value) : got.value;
  });
  if (action === "reroute") {
    if (!values.goto) errors.goto = "choose the node to continue from";
    else body.goto = values.goto;
  }
  const ctx = parseField({ type: "json" }, values.context);
  if (ctx.error) errors.context = "Context " + ctx.error;
  else if (!ctx.empty) {
    if (typeOf(ctx.value) !== "object") errors.context = "Context must be a JSON object";
    else if (JSON.stringify(ctx.value) !== JSON.stringify(originalContext === undefined ? ctx.value : originalContext)) {
      body.context = ctx.value;
      if (action === "approve") body.action = "edit_context";
    }
  }
  return { body, errors };
}

/** A loop path as [{node, visit}] (the server's `why` already has it so; the halt's details list ids). */
export function pathWithVisits(path) {
  const seen = {};
  return (path || []).map((p) => {
    if (p && typeof p === "object") return p;
    seen[p] = (seen[p] || 0) + 1;
    return { node: p, visit: seen[p] };
  });
}

/** "$0.00013", "$0.02", "$1.50": small LLM costs keep their digits, trailing zeros go. */
export function money(v) {
  if (v === null || v === undefined) return "—";
  let text = Number(v).toFixed(6).replace(/0+$/, "");
  if (text.split(".")[1].length < 2) text = Number(v).toFixed(2);
  return "$" + text;
}

/** What explains an item, as [{label, text}] rows (a loop's also `path`): from the server's `why`
 * (dashboard/pages/review_facts.py) or, for an item opened while the page was open, the halt's details. */
export function explain(reason, why) {
  const w = why || {};
  const rows = [];
  if (w.message) rows.push({ label: reason === "human_task" ? "Question" : "Why", text: w.message || w.prompt });
  else if (w.prompt) rows.push({ label: "Question", text: w.prompt });
  if (reason === "loop_breaker") {
    const path = pathWithVisits(w.path);
    const visits = {};
    path.forEach((p) => { visits[p.node] = Math.max(visits[p.node] || 0, p.visit); });
    rows.push({ label: "Path", text: path.map((p) => p.node + (p.visit > 1 ? " ×" + p.visit : "")).join(" → "), path });
    const most = Object.entries(visits).sort((a, b) => b[1] - a[1]).map(([n, v]) => n + " " + v + "×").join(", ");
    if (most) rows.push({ label: "Visits", text: most });
    const limit = w.max_transitions;
    if (limit !== undefined) rows.push({ label: "Activations", text: (w.loop_count !== undefined ? w.loop_count : "?") + " of " + limit });
    if (w.next && w.next.length) rows.push({ label: "Next", text: w.next.join(", ") });
  } else if (reason === "budget_exceeded") {
    const b = w.budget || w;
    if (b.budget_usd !== undefined && b.budget_usd !== null) {
      rows.push({ label: "Spent", text: money(b.cost_usd) + " of " + money(b.budget_usd) + " budget" });
    }
    if (b.budget_tokens !== undefined && b.budget_tokens !== null) {
      rows.push({ label: "Tokens", text: b.tokens + " of " + b.budget_tokens });
    } else if (b.tokens !== undefined) rows.push({ label: "Tokens", text: String(b.tokens) });
  } else if (reason === "circuit_open") {
    const br = w.breaker && typeof w.breaker === "object" ? w.breaker : { key: w.breaker };
    rows.push({ label: "Breaker", text: (br.key || "?") + (br.state ? " · " + br.state.replace("_", "-") : "") });
    if (br.calls !== undefined) rows.push({ label: "Window", text: br.failures + " failed of " + br.calls + " calls"
      + (w.breaker_config ? " in " + w.breaker_config.window_s + " s (opens at " + Math.round(w.breaker_config.failure_ratio * 100) + "%)" : "") });
    if (br.cooldown_left_s !== undefined && br.cooldown_left_s !== null) rows.push({ label: "Cool-down", text: br.cooldown_left_s + " s left" });
  } else if (reason === "ttl_expired") {
    if (w.ttl_s) rows.push({ label: "Time to live", text: w.ttl_s + " s" });
    if (w.deadline) rows.push({ label: "Deadline", text: w.deadline });
  }
  if (w.node && reason !== "human_task") rows.push({ label: "Node", text: w.node });
  return rows;
}
