// The editor's graph model (static/js/editor/model.js): pure functions over the graph JSON.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  History, ID_RULE, closestId, diffRows, shortJson, editDistance, errorsByPath, getPath, issueTargets, paletteOrder, parseImport, parseStartInput,
  renameNode, renameProblem, setPath, uniqueNodeId,
} from "../../static/js/editor/model.js";
import { compile } from "../../static/js/lib/schema-check.js";

const graph = () => ({
  nodes: [{ id: "start", type: "start" }, { id: "ask", type: "llm", config: { prompt: "hi" } }, { id: "end", type: "end" }],
  edges: [{ source: "start", target: "ask" }, { source: "ask", target: "end", when: "route == 'x'" }],
  settings: { max_transitions: 5 },
});

test("setPath sets and deletes nested fields, dropping emptied objects", () => {
  const node = {};
  setPath(node, ["retry", "max_attempts"], 3);
  setPath(node, ["retry", "backoff_s"], 1.5);
  assert.deepEqual(node, { retry: { max_attempts: 3, backoff_s: 1.5 } });
  assert.equal(getPath(node, "retry.max_attempts"), 3);
  assert.equal(getPath(node, "retry.nothing.deeper"), undefined);
  setPath(node, ["retry", "max_attempts"], undefined);
  setPath(node, ["retry", "backoff_s"], undefined);
  assert.deepEqual(node, {});
  setPath(node, ["fallback", "route"], undefined); // deleting what is not there creates nothing
  assert.deepEqual(node, {});
});

test("new node ids: start and end by name, others numbered from the first free number", () => {
  const taken = new Set(["start", "llm_1", "llm_3"]);
  const has = (id) => taken.has(id);
  assert.equal(uniqueNodeId("end", has), "end");
  assert.equal(uniqueNodeId("start", has), "start_1");
  assert.equal(uniqueNodeId("llm", has), "llm_2");
});

test("renaming a node moves its edges and never changes the graph it was given", () => {
  const g = graph();
  const out = renameNode(g, "ask", "classify");
  assert.deepEqual(out.nodes.map((n) => n.id), ["start", "classify", "end"]);
  assert.deepEqual(out.edges.map((e) => [e.source, e.target]), [["start", "classify"], ["classify", "end"]]);
  assert.equal(g.nodes[1].id, "ask");
  assert.equal(renameProblem(g, "ask", "end"), "there is already a node 'end'");
  assert.equal(renameProblem(g, "ask", "9lives"), ID_RULE);
  assert.equal(renameProblem(g, "ask", "ask"), null);
  assert.equal(renameProblem(g, "ask", "ask_2"), null);
});

test("import checks the document's shape and names the problem", () => {
  assert.match(parseImport("{").error, /^This is not valid JSON/);
  assert.equal(parseImport("[]").error, "The file must hold a JSON object.");
  assert.equal(parseImport('{"nodes": []}').error, "'nodes' must be a non-empty list.");
  assert.equal(parseImport('{"nodes": [{"id": "a"}]}').error, "node 1 needs a string 'id' and 'type'.");
  assert.equal(parseImport('{"nodes": [{"id": "a", "type": "start"}, {"id": "a", "type": "end"}]}').error,
    "node id 'a' appears twice.");
  assert.equal(parseImport('{"nodes": [{"id": "a", "type": "start"}], "edges": [{"source": "a", "target": "b"}]}').error,
    "edge 1: target 'b' is not one of the file's nodes");
  const typo = { nodes: [{ id: "start", type: "start" }, { id: "fetch", type: "http" }, { id: "reply", type: "end" }],
    edges: [{ source: "start", target: "fetch" }, { source: "fetch", target: "reply" }, { source: "start", target: "fetc" }] };
  assert.equal(parseImport(JSON.stringify(typo)).error,
    "edge 3: target 'fetc' is not one of the file's nodes (did you mean 'fetch'?)");
  typo.edges[2] = { source: "nowhere", target: "reply" };
  assert.equal(parseImport(JSON.stringify(typo)).error, "edge 3: source 'nowhere' is not one of the file's nodes");
  typo.edges[2] = { target: "reply" };
  assert.equal(parseImport(JSON.stringify(typo)).error, "edge 3: 'source' is missing");
  typo.edges[2] = [];
  assert.equal(parseImport(JSON.stringify(typo)).error, "edge 3: must be an object with 'source' and 'target'");
  const doc = Object.assign({ slug: "x", name: "X", input: { type: "object" } }, graph());
  const { graph: g } = parseImport(JSON.stringify(doc));
  assert.deepEqual(Object.keys(g).sort(), ["edges", "input", "nodes", "settings"]);
});

test("the start input must be a JSON object; empty is {}", () => {
  assert.deepEqual(parseStartInput(""), { value: {} });
  assert.deepEqual(parseStartInput('{"q": 1}'), { value: { q: 1 } });
  assert.equal(parseStartInput("[1]").error, "The start input must be a JSON object ({…}).");
  assert.match(parseStartInput("{q").error, /^Not valid JSON/);
});

test("a validation issue marks its node, its edge by index, and a whole cycle", () => {
  const nodes = new Set(["a", "b", "c"]);
  const edges = [{ id: "e0", source: "a", target: "b" }, { id: "e1", source: "b", target: "c" },
    { id: "e2", source: "c", target: "a" }, { id: "e3", source: "c", target: "a", when: "x" }];
  assert.deepEqual(issueTargets({ node: "b", message: "m" }, nodes, edges), ["b"]);
  assert.deepEqual(issueTargets({ node: "gone", edge: 1, message: "m" }, nodes, edges), ["e1"]);
  assert.deepEqual(issueTargets({ message: "unconditional cycle a -> b -> c -> a: add a condition" }, nodes, edges),
    ["a", "e0", "b", "e1", "c", "e2"]);
});

test("schema errors map to the panel's field paths", () => {
  const validate = compile({ type: "object", required: ["prompt"], additionalProperties: false,
    properties: { prompt: { type: "string" }, retry: { type: "object", properties: { max_attempts: { type: "integer", minimum: 1 } } } } });
  assert.equal(validate({ prompt: "x" }), true);
  assert.equal(validate({ extra: 1, retry: { max_attempts: 0 } }), false);
  assert.deepEqual(errorsByPath(validate.errors, "config"), {
    "config.prompt": "required", "config.extra": "not a known setting", "config.retry.max_attempts": "must be >= 1",
  });
});

test("a diff becomes one row per change", () => {
  const rows = diffRows({
    nodes: { added: ["n"], removed: [], changed: [{ id: "ask", fields: ["config"] }], moved: ["end"] },
    edges: { added: [{ source: "a", target: "b", when: "x" }], removed: [], changed: [] },
    settings: { ttl_s: [null, 60] },
  });
  assert.deepEqual(rows, [["added", "node", "n"], ["changed", "node", "ask (config)"], ["moved", "node", "end"],
    ["added", "edge", "a → b when x"], ["changed", "setting", "ttl_s: null ⇒ 60"]]);
});

test("a changed node gives a row per changed value; the declared input a row per field", () => {
  const rows = diffRows({
    nodes: { added: [], removed: [], moved: [], changed: [{ id: "ask", fields: ["config", "timeout_s"], changes: [
      { path: "config.prompt", before: "Classify", after: "Classify {{ input.ticket }}" },
      { path: "timeout_s", after: 30 }, { path: "retry", before: { max_attempts: 2 } }] }] },
    edges: { added: [], removed: [], changed: [] }, settings: {}, input_changed: true,
    input: { declared: [true, true], added: [{ name: "tier", type: "string", required: true }], removed: ["old"],
      changed: [{ name: "ticket", changes: [{ path: "required", before: true, after: false }] }], other: [] },
  });
  assert.deepEqual(rows, [
    ["changed", "node", 'ask: config.prompt: "Classify" ⇒ "Classify {{ input.ticket }}"'],
    ["changed", "node", "ask: timeout_s set to 30"],
    ["changed", "node", 'ask: retry removed (was {"max_attempts":2})'],
    ["added", "input field", "tier (string, required)"],
    ["removed", "input field", "old"],
    ["changed", "input field", "ticket: required: true ⇒ false"]]);
  const dropped = diffRows({ nodes: { added: [], removed: [], changed: [], moved: [] },
    edges: { added: [], removed: [], changed: [] }, settings: {},
    input: { declared: [true, false], added: [], removed: ["ticket"], changed: [], other: [] } });
  assert.equal(dropped[0][1], "input");
  assert.match(dropped[0][2], /declared start input/);
  assert.equal(shortJson("x".repeat(100)).length, 60);
});

test("the palette lists the usual flow first", () => {
  assert.deepEqual(paletteOrder(["end", "custom", "http", "start", "llm"]), ["start", "llm", "http", "end", "custom"]);
});

test("history: undo, redo, a new edit drops the redo branch, dirty against the saved snapshot", () => {
  const h = new History("s0", 3);
  assert.equal(h.dirty, false);
  assert.equal(h.push("s0"), false); // nothing changed
  h.push("s1");
  h.push("s2");
  assert.ok(h.dirty);
  assert.equal(h.undo(), "s1");
  assert.equal(h.undo(), "s0");
  assert.equal(h.canUndo, false);
  assert.equal(h.dirty, false);
  assert.equal(h.redo(), "s1");
  h.push("s3");
  assert.equal(h.canRedo, false);
  h.push("s4"); // past the limit: the oldest goes
  assert.deepEqual(h.stack, ["s1", "s3", "s4"]);
  h.markSaved();
  assert.equal(h.dirty, false);
});

test("closest ids: a typo gets a guess, a tie or a far id gets none", () => {
  const ids = new Set(["fetch", "reply", "classify", "a", "b"]);
  assert.equal(closestId("fetc", ids), "fetch");
  assert.equal(closestId("clasify", ids), "classify");
  assert.equal(closestId("c", ids), null); // one letter: no guess
  assert.equal(closestId("zzzzzz", ids), null);
  assert.equal(closestId("ab", new Set(["abc", "abd"])), null);
  assert.equal(editDistance("kitten", "sitting", 10), 3);
  assert.equal(editDistance("kitten", "sitting", 2), 2); // gives up at the limit
});
