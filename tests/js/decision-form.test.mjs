// The review decision form (static/js/review/decision-form.js): fields and buttons per reason, the body a
// filled form makes, what is wrong with it, and what explains an item.
import { test } from "node:test";
import assert from "node:assert/strict";
import { collectDecision, decisionSpec, defaults, explain, inputField, pathWithVisits }
  from "../../static/js/review/decision-form.js";

const INPUTS = {
  amount: { type: "number", minimum: 0, maximum: 100, description: "refund in EUR", default: 12.5 },
  reason: { type: "string", minLength: 3, description: "shown to the customer" },
  channel: { enum: ["mail", "phone"], default: "mail" },
  urgent: { type: "boolean", description: "page someone" },
  tags: { type: "array", examples: [["a"]] },
};
const NODES = [{ id: "start", type: "start" }, { id: "draft", type: "llm" }, { id: "end", type: "end" }];

test("a human task gets one field per declared input, with its description and default, and approve/reject", () => {
  const spec = decisionSpec("human_task", { inputs: INPUTS });
  assert.equal(spec.human, true);
  assert.deepEqual(spec.actions.map((a) => [a.action, a.key]), [["approve", "a"], ["reject", "r"]]);
  const byName = Object.fromEntries(spec.fields.map((f) => [f.name, f]));
  assert.equal(byName["input:amount"].type, "number");
  assert.equal(byName["input:amount"].help, "refund in EUR");
  assert.equal(byName["input:amount"].max, 100);
  assert.equal(byName["input:channel"].type, "select");
  assert.equal(byName["input:urgent"].type, "checkbox");
  assert.equal(byName["input:tags"].type, "json");
  assert.equal(byName["input:tags"].placeholder, '["a"]');
  const initial = defaults(spec);
  assert.equal(initial["input:amount"], "12.5");
  assert.equal(initial["input:channel"], '"mail"');
  assert.equal(initial["input:urgent"], false);
  assert.equal(initial.note, "");
});

test("approving a human task validates every input against its schema before a round trip", () => {
  const spec = decisionSpec("human_task", { inputs: INPUTS });
  const values = Object.assign(defaults(spec), { "input:amount": "500", "input:reason": "ok", "input:tags": "[1" });
  const { errors } = collectDecision(spec, "approve", values, { item: 7 });
  assert.match(errors["input:amount"], /at most 100/);
  assert.match(errors["input:reason"], /at least 3 characters/);
  assert.match(errors["input:tags"], /not valid JSON/);

  const good = Object.assign(defaults(spec), { "input:reason": "late parcel", "input:tags": '["x"]',
    "input:urgent": true, note: "fine" });
  const { body, errors: none } = collectDecision(spec, "approve", good, { item: 7 });
  assert.deepEqual(none, {});
  assert.deepEqual(body, { action: "approve", note: "fine", item: 7,
    inputs: { amount: 12.5, reason: "late parcel", channel: "mail", urgent: true, tags: ["x"] } });
});

test("rejecting a human task needs no inputs", () => {
  const spec = decisionSpec("human_task", { inputs: INPUTS });
  const { body, errors } = collectDecision(spec, "reject", { note: "no" });
  assert.deepEqual(errors, {});
  assert.deepEqual(body, { action: "reject", note: "no" });
});

test("each halt puts the grant its reason calls for first", () => {
  const first = (reason) => decisionSpec(reason, { nodes: NODES }).fields.find((f) => f.primary);
  assert.equal(first("loop_breaker").name, "extra_transitions");
  assert.equal(first("budget_exceeded").name, "extra_budget_usd");
  assert.equal(first("ttl_expired").name, "extra_ttl_s");
  const spec = decisionSpec("poison_step", { nodes: NODES });
  assert.ok(spec.actions.some((a) => a.action === "retry"));
  const gotoField = spec.fields.find((f) => f.name === "goto");
  assert.deepEqual(gotoField.options.map((o) => o.value), ["", "draft", "end"]);
});

test("a halt's body: grants as numbers, the budget as a string, an edited context as edit_context", () => {
  const context = { ticket: "T-1" };
  const spec = decisionSpec("budget_exceeded", { nodes: NODES, context });
  const values = Object.assign(defaults(spec), { extra_budget_usd: "0.5", extra_transitions: "3" });
  let { body, errors } = collectDecision(spec, "approve", values, { item: 3, originalContext: context });
  assert.deepEqual(errors, {});
  assert.deepEqual(body, { action: "approve", note: "", item: 3, extra_transitions: 3, extra_budget_usd: "0.5" });

  values.context = '{"ticket": "T-2"}';
  ({ body } = collectDecision(spec, "approve", values, { originalContext: context }));
  assert.equal(body.action, "edit_context");
  assert.deepEqual(body.context, { ticket: "T-2" });

  values.context = "[1]";
  values.extra_transitions = "1.5";
  ({ errors } = collectDecision(spec, "approve", values, { originalContext: context }));
  assert.match(errors.context, /JSON object/);
  assert.match(errors.extra_transitions, /whole number/);

  ({ errors } = collectDecision(spec, "reroute", defaults(spec), { originalContext: context }));
  assert.match(errors.goto, /choose the node/);
});

test("a loop's path is shown with each node's visit count", () => {
  assert.deepEqual(pathWithVisits(["a", "b", "a"]), [{ node: "a", visit: 1 }, { node: "b", visit: 1 },
    { node: "a", visit: 2 }]);
  const rows = explain("loop_breaker", { message: "more than 4", path: ["fetch", "check", "fetch", "check"],
    max_transitions: 4, loop_count: 4, next: ["fetch"] });
  const byLabel = Object.fromEntries(rows.map((r) => [r.label, r.text]));
  assert.equal(byLabel.Path, "fetch → check → fetch ×2 → check ×2");
  assert.equal(byLabel.Visits, "fetch 2×, check 2×");
  assert.equal(byLabel.Activations, "4 of 4");
});

test("a budget halt says what was spent against the limit; a breaker its window", () => {
  const rows = explain("budget_exceeded", { budget: { cost_usd: 0.02, budget_usd: 0.01, tokens: 900 } });
  assert.ok(rows.some((r) => r.text === "$0.02 of $0.01 budget"));
  const tiny = explain("budget_exceeded", { cost_usd: 0.00013, budget_usd: 0.0001, tokens: 396 });
  assert.ok(tiny.some((r) => r.text === "$0.00013 of $0.0001 budget"), JSON.stringify(tiny));
  const breaker = explain("circuit_open", { breaker: { key: "llm:x", state: "open", calls: 10, failures: 6 },
    breaker_config: { window_s: 60, failure_ratio: 0.5 } });
  assert.ok(breaker.some((r) => r.text === "6 failed of 10 calls in 60 s (opens at 50%)"));
  assert.equal(inputField("x", {}).type, "json");
});
