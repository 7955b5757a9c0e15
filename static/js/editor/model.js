/* The editor's graph model, pure: no DOM, no cytoscape (tests/js/editor-model.test.mjs).
 *
 * A graph is the JSON of docs/DESIGN.md ({nodes, edges, settings?}); a node's fields are edited by a
 * dotted path ("config.prompt", "retry.max_attempts"). History keeps the undo stack as snapshot strings.
 */

export const ID_PATTERN = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
export const ID_RULE = "an id starts with a letter or _ and holds only letters, digits, _ and - (64 at most)";

export const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

/** Set (or, with undefined, delete) obj's value at `keys`; emptied intermediate objects are removed. */
export function setPath(obj, keys, value) {
  const [head, ...rest] = keys;
  if (rest.length === 0) {
    if (value === undefined) delete obj[head];
    else obj[head] = value;
    return obj;
  }
  if (typeof obj[head] !== "object" || obj[head] === null || Array.isArray(obj[head])) {
    if (value === undefined) return obj;
    obj[head] = {};
  }
  setPath(obj[head], rest, value);
  if (Object.keys(obj[head]).length === 0) delete obj[head];
  return obj;
}

export function getPath(obj, path) {
  return path.split(".").reduce((o, k) => (o && typeof o === "object" ? o[k] : undefined), obj);
}

/** A new node's id: `start`/`end` when free, else `<type>_<n>` with the first free n. */
export function uniqueNodeId(type, taken) {
  if ((type === "start" || type === "end") && !taken(type)) return type;
  let n = 1;
  while (taken(`${type}_${n}`)) n += 1;
  return `${type}_${n}`;
}

/** Why `newId` cannot replace `oldId` (null: it can). */
export function renameProblem(graph, oldId, newId) {
  if (oldId === newId) return null;
  if (!ID_PATTERN.test(newId)) return ID_RULE;
  if (graph.nodes.some((n) => n.id === newId)) return `there is already a node '${newId}'`;
  return null;
}

/** The graph with node `oldId` renamed, its edges following (a new object; the input is not changed). */
export function renameNode(graph, oldId, newId) {
  const out = clone(graph);
  out.nodes.forEach((n) => { if (n.id === oldId) n.id = newId; });
  out.edges.forEach((e) => {
    if (e.source === oldId) e.source = newId;
    if (e.target === oldId) e.target = newId;
  });
  return out;
}

/** Why an imported edge cannot be drawn (null: it can): names the end that is missing, and the
 * closest node id when it looks like a typo ("target 'fetc' is not one of the file's nodes (fetch?)"). */
export function danglingEdgeProblem(edge, ids) {
  if (!edge || typeof edge !== "object" || Array.isArray(edge)) return "must be an object with 'source' and 'target'";
  for (const end of ["source", "target"]) {
    const id = edge[end];
    if (id === undefined || id === null || id === "") return `'${end}' is missing`;
    if (typeof id !== "string") return `'${end}' must be a node id (a string), not ${JSON.stringify(id)}`;
    if (!ids.has(id)) {
      const near = closestId(id, ids);
      return `${end} '${id}' is not one of the file's nodes${near ? ` (did you mean '${near}'?)` : ""}`;
    }
  }
  return null;
}

/** The nearest id to `id` within an edit distance of a third of its length (2 at most): none when two
 * tie or none is that close, so a one-letter id gets no guess. */
export function closestId(id, ids) {
  let best = null;
  const limit = Math.min(2, Math.floor(id.length / 3)) + 1;
  let bestDistance = limit;
  let tie = false;
  for (const candidate of ids) {
    const d = editDistance(id, candidate, limit);
    if (d < bestDistance) { best = candidate; bestDistance = d; tie = false; } else if (d === bestDistance && d < limit) tie = true;
  }
  return best !== null && !tie ? best : null;
}

/** Levenshtein distance, giving up (returning `limit`) once it reaches `limit`: ids are at most 64 characters. */
export function editDistance(a, b, limit) {
  if (Math.abs(a.length - b.length) >= limit) return limit;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j += 1) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      rowMin = Math.min(rowMin, row[j]);
    }
    if (rowMin >= limit) return limit;
    prev = row;
  }
  return Math.min(prev[b.length], limit);
}

/** Check an imported document's shape well enough to draw it; the server's validator says the rest. */
export function parseImport(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (exc) {
    return { error: "This is not valid JSON: " + exc.message };
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return { error: "The file must hold a JSON object." };
  if (!Array.isArray(doc.nodes) || !doc.nodes.length) return { error: "'nodes' must be a non-empty list." };
  if (doc.edges !== undefined && !Array.isArray(doc.edges)) return { error: "'edges' must be a list." };
  const ids = new Set();
  for (const [i, n] of doc.nodes.entries()) {
    if (!n || typeof n !== "object" || typeof n.id !== "string" || typeof n.type !== "string") {
      return { error: `node ${i + 1} needs a string 'id' and 'type'.` };
    }
    if (ids.has(n.id)) return { error: `node id '${n.id}' appears twice.` };
    ids.add(n.id);
  }
  for (const [i, e] of (doc.edges || []).entries()) {
    const problem = danglingEdgeProblem(e, ids);
    if (problem) return { error: `edge ${i + 1}: ${problem}` };
  }
  if (doc.settings !== undefined && (typeof doc.settings !== "object" || Array.isArray(doc.settings))) {
    return { error: "'settings' must be an object." };
  }
  const graph = { nodes: doc.nodes, edges: doc.edges || [] };
  if (doc.settings) graph.settings = doc.settings;
  if (doc.input !== undefined) graph.input = doc.input;
  return { graph, doc };
}

/** Parse a form field's text: {value} or {error}; empty text is no value (the key is left out).
 * kinds: text, textarea, number, integer, select, lines, json, bool. */
export function parseField(kind, raw) {
  if (kind === "select") return { value: raw === "" ? undefined : raw };
  if (kind === "bool") return { value: raw === "" ? undefined : raw === "true" };
  if (raw.trim() === "") return { value: undefined };
  if (kind === "number" || kind === "integer") {
    const n = Number(raw);
    return Number.isFinite(n) ? { value: n } : { error: "not a number" };
  }
  if (kind === "lines") return { value: raw.split("\n").map((s) => s.trim()).filter(Boolean) };
  if (kind === "json") {
    try {
      return { value: JSON.parse(raw) };
    } catch (exc) {
      return { error: "not valid JSON: " + exc.message };
    }
  }
  return { value: raw };
}

/** The Run dialog's text as a start input: {value} or {error}. Empty text is {}. */
export function parseStartInput(text) {
  let value;
  try {
    value = JSON.parse(text || "{}");
  } catch (exc) {
    return { error: "Not valid JSON: " + exc.message };
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    return { error: "The start input must be a JSON object ({…})." };
  }
  return { value };
}

/** The element ids a server validation issue names: its node, its edge (by index into `edges`, the
 * canvas's edges in graph order: [{id, source, target, when}]), and for a cycle every node on it and
 * the unconditional edges between them. */
export function issueTargets(issue, nodeIds, edges) {
  const ids = [];
  const hasNode = (id) => nodeIds.has(id);
  if (issue.node && hasNode(issue.node)) ids.push(issue.node);
  if (typeof issue.edge === "number" && edges[issue.edge]) ids.push(edges[issue.edge].id);
  const cycle = /cycle ([^:]+):/.exec(issue.message || "");
  if (cycle) {
    const names = cycle[1].split(" -> ").map((s) => s.trim());
    names.forEach((n, i) => {
      if (hasNode(n) && !ids.includes(n)) ids.push(n);
      if (i + 1 < names.length) {
        edges.filter((e) => e.source === n && e.target === names[i + 1] && !e.when)
          .forEach((e) => { if (!ids.includes(e.id)) ids.push(e.id); });
      }
    });
  }
  return ids;
}

/** Schema errors (Ajv's shape, lib/schema-check.js) as {path: message} under `prefix`:
 * "config.prompt", "retry.max_attempts", "" for the whole object. The first error of a path wins. */
export function errorsByPath(errors, prefix) {
  const out = {};
  (errors || []).forEach((e) => {
    let path = e.instancePath.split("/").filter(Boolean).join(".");
    if (e.keyword === "required") path = path ? path + "." + e.params.missingProperty : e.params.missingProperty;
    if (e.keyword === "additionalProperties") path = path ? path + "." + e.params.additionalProperty : e.params.additionalProperty;
    let message = e.message;
    if (e.keyword === "required") message = "required";
    if (e.keyword === "additionalProperties") message = "not a known setting";
    if (e.keyword === "oneOf") message = "fill in exactly one of the fields below";
    const full = prefix ? (path ? prefix + "." + path : prefix) : path;
    if (!out[full]) out[full] = message;
  });
  return out;
}

/** A JSON value for a diff row, cut to `max` characters. */
export function shortJson(value, max = 60) {
  const text = JSON.stringify(value);
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

/** One value change ({path, before?, after?}: a side without the key has none) as text. */
export function changeText(c) {
  if (!("before" in c)) return `${c.path} set to ${shortJson(c.after)}`;
  if (!("after" in c)) return `${c.path} removed (was ${shortJson(c.before)})`;
  return `${c.path}: ${shortJson(c.before)} ⇒ ${shortJson(c.after)}`;
}

/** A version diff (GET .../diff) as rows [kind, what, text] for the versions dialog: a changed node
 * row per changed value (config.prompt, retry.max_attempts), the declared input field by field. */
export function diffRows(d) {
  const edgeText = (e) => `${e.source} → ${e.target}${e.when ? ` when ${e.when}` : ""}`;
  const rows = [];
  d.nodes.added.forEach((id) => rows.push(["added", "node", id]));
  d.nodes.removed.forEach((id) => rows.push(["removed", "node", id]));
  d.nodes.changed.forEach((c) => {
    if (c.changes && c.changes.length) c.changes.forEach((v) => rows.push(["changed", "node", `${c.id}: ${changeText(v)}`]));
    else rows.push(["changed", "node", `${c.id} (${c.fields.join(", ")})`]);
  });
  d.nodes.moved.forEach((id) => rows.push(["moved", "node", id]));
  d.edges.added.forEach((e) => rows.push(["added", "edge", edgeText(e)]));
  d.edges.removed.forEach((e) => rows.push(["removed", "edge", edgeText(e)]));
  d.edges.changed.forEach((e) => rows.push(["changed", "edge", `${edgeText(e.before)} ⇒ ${edgeText(e)}`]));
  Object.entries(d.settings).forEach(([k, [a, b]]) => rows.push(["changed", "setting",
    `${k}: ${JSON.stringify(a)} ⇒ ${JSON.stringify(b)}`]));
  const input = d.input;
  if (input) {
    const [had, has] = input.declared || [true, true];
    if (!had && has) rows.push(["added", "input", "a declared start input"]);
    if (had && !has) rows.push(["removed", "input", "the declared start input (Run then takes any JSON object)"]);
    input.added.forEach((f) => rows.push(["added", "input field",
      `${f.name} (${f.type || "any"}${f.required ? ", required" : ""})`]));
    input.removed.forEach((name) => rows.push(["removed", "input field", name]));
    input.changed.forEach((f) => f.changes.forEach((v) => rows.push(["changed", "input field", `${f.name}: ${changeText(v)}`])));
    (input.other || []).forEach((v) => rows.push(["changed", "input", changeText(v)]));
  } else if (d.input_changed) rows.push(["changed", "input", "the declared start input"]);
  return rows;
}

/** Node types in palette order: the usual flow first, then the rest as the server lists them. */
export function paletteOrder(names) {
  const order = ["start", "llm", "router", "http", "python", "human", "wait", "end"];
  return names.slice().sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
}

/* Undo/redo over snapshot strings: push() records one edit (none when nothing changed), at most
 * `limit` kept. `saved` is the snapshot last saved or loaded; dirty means the current one differs. */
export class History {
  constructor(first, limit = 300) {
    this.stack = [first];
    this.index = 0;
    this.limit = limit;
    this.saved = first;
  }

  get current() { return this.stack[this.index]; }
  get canUndo() { return this.index > 0; }
  get canRedo() { return this.index < this.stack.length - 1; }
  get dirty() { return this.saved !== null && this.current !== this.saved; }

  push(snap) {
    if (snap === this.current) return false;
    this.stack = this.stack.slice(0, this.index + 1);
    this.stack.push(snap);
    if (this.stack.length > this.limit) this.stack.shift();
    this.index = this.stack.length - 1;
    return true;
  }

  undo() { if (this.canUndo) this.index -= 1; return this.current; }
  redo() { if (this.canRedo) this.index += 1; return this.current; }
  markSaved(snap) { this.saved = snap === undefined ? this.current : snap; }
}
