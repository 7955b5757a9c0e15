/* The Steadyflow workflow editor: draw a graph, edit its nodes and edges in the side panel, validate
 * with the server's validator, save immutable versions, compare and restore them, import/export JSON,
 * and start a run.
 *
 * The canvas (cytoscape) holds the graph: each node's data carries its id, type and the rest of its
 * JSON (`node`), each edge its source, target, `when` and the rest (`edge`). toGraph() turns the canvas
 * back into the graph JSON of docs/DESIGN.md, positions included. Every edit ends in commit(),
 * which pushes a snapshot on the undo stack; undo and redo rebuild the canvas from a snapshot.
 */
(function () {
  "use strict";

  const G = window.SteadyflowGraph;
  const CFG = JSON.parse(document.getElementById("editor-config").textContent);
  const CSRF = (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";
  const ID_PATTERN = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
  const $ = (sel) => document.querySelector(sel);

  const state = {
    types: {},            // node type name -> {name, label, icon, color, schema, default_queue, structural}
    typeOrder: [],
    readOnly: CFG.readOnly,
    version: CFG.version, // the version shown (and the base a save starts from)
    latest: CFG.latest,
    name: CFG.name,
    description: CFG.description || "",
    settings: {},
    undo: [],
    undoIndex: -1,
    saved: null,          // snapshot string of the last saved (or loaded) state
    issues: [],           // last server validation: [{message, node?, edge?, field?, ids: [element ids]}]
    issuesShown: false,
    parseErrors: new Set(), // panel fields whose text does not parse (JSON, numbers): not applied
    edgeSeq: 0,
    connectMode: false,
  };
  let cy = null;
  let eh = null;
  let schemaCheck = null; // static/js/schema-check.js
  const compiled = {};

  // ---------------------------------------------------------------- helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => {
      if (v === undefined || v === null || v === false) return;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(node.dataset, v);
      // Through the CSSOM: a style *attribute* is inline style, which the Content-Security-Policy refuses.
      else if (k === "style") node.style.cssText = v;
      else node.setAttribute(k, v === true ? "" : v);
    });
    children.flat().forEach((c) => {
      if (c === undefined || c === null || c === false) return;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    });
    return node;
  }

  const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

  function toast(message, kind) {
    const box = $("#toast");
    box.textContent = message;
    box.className = "toast " + (kind || "info");
    box.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { box.hidden = true; }, kind === "error" ? 7000 : 3500);
  }

  async function api(method, url, body) {
    const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    if (method !== "GET") init.headers["X-CSRFToken"] = CSRF;
    let response;
    try {
      response = await fetch(url, init);
    } catch (exc) {
      return { ok: false, status: 0, data: { message: "the server did not answer: " + exc.message } };
    }
    let data = {};
    try {
      data = await response.json();
    } catch (exc) {
      data = { message: `the server answered ${response.status} without JSON` };
    }
    return { ok: response.ok, status: response.status, data };
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
  }

  // ---------------------------------------------------------------- model <-> canvas

  const isReal = (ele) => !ele.hasClass("eh-ghost") && !ele.hasClass("eh-ghost-node")
    && !ele.hasClass("eh-ghost-edge") && !ele.hasClass("eh-preview");
  const realNodes = () => cy.nodes().filter(isReal);
  const realEdges = () => cy.edges().filter(isReal);

  /** The graph JSON on the canvas, positions included (rounded: a layout reopens exactly as saved). */
  function toGraph() {
    const nodes = realNodes().map((n) => {
      const d = n.data();
      const p = n.position();
      return Object.assign({ id: d.id, type: d.type }, clone(d.node) || {},
        { position: { x: Math.round(p.x), y: Math.round(p.y) } });
    });
    const edges = realEdges().map((e) => {
      const d = e.data();
      const out = { source: d.source, target: d.target };
      if (d.when) out.when = d.when;
      return Object.assign(out, clone(d.edge) || {});
    });
    const graph = { nodes, edges };
    if (Object.keys(state.settings).length) graph.settings = clone(state.settings);
    return graph;
  }

  function snapshot() {
    return JSON.stringify({ graph: toGraph(), name: state.name, description: state.description });
  }

  function newEdgeId() {
    state.edgeSeq += 1;
    return "x" + state.edgeSeq;
  }

  /** Replace the canvas with `graph` (used by load, undo/redo, import, rename). */
  function showGraph(graph, keepSelection) {
    const selected = keepSelection ? cy.$("node:selected").map((n) => n.id()) : [];
    cy.batch(() => {
      cy.elements().remove();
      cy.add(G.elements(graph, state.types, "g" + (++state.edgeSeq) + "_"));
      selected.forEach((id) => cy.getElementById(id).select());
    });
    state.settings = clone(graph.settings) || {};
    clearIssueMarks();
  }

  function restore(snap) {
    const s = JSON.parse(snap);
    state.name = s.name;
    state.description = s.description;
    showGraph(s.graph, true);
    afterChange(true);
    renderPanel();
  }

  /** Record the current state as one undoable edit (no-op when nothing changed). */
  function commit() {
    const snap = snapshot();
    if (snap === state.undo[state.undoIndex]) return;
    state.undo = state.undo.slice(0, state.undoIndex + 1);
    state.undo.push(snap);
    if (state.undo.length > 300) state.undo.shift();
    state.undoIndex = state.undo.length - 1;
    afterChange(false);
  }

  function undo() {
    if (state.readOnly || state.undoIndex <= 0) return;
    state.undoIndex -= 1;
    restore(state.undo[state.undoIndex]);
  }

  function redo() {
    if (state.readOnly || state.undoIndex >= state.undo.length - 1) return;
    state.undoIndex += 1;
    restore(state.undo[state.undoIndex]);
  }

  const isDirty = () => !state.readOnly && state.saved !== null && state.undo[state.undoIndex] !== state.saved;

  function afterChange(fromHistory) {
    updateToolbar();
    if (state.issuesShown) revalidateSoon();
    if (!fromHistory) refreshPanelIssues();
  }

  // ---------------------------------------------------------------- toolbar state

  function updateToolbar() {
    const dirty = isDirty();
    $("#dirty-flag").hidden = !dirty;
    $("#readonly-flag").hidden = !state.readOnly;
    $("#btn-undo").disabled = state.readOnly || state.undoIndex <= 0;
    $("#btn-redo").disabled = state.readOnly || state.undoIndex >= state.undo.length - 1;
    $("#btn-delete").disabled = state.readOnly || cy.$(":selected").filter(isReal).empty();
    $("#btn-save").disabled = state.readOnly || !(dirty || state.latest === null);
    $("#btn-run").disabled = !CFG.canRun || state.latest === null;
    $("#btn-run").title = state.latest === null ? "Save a first version to run it"
      : (CFG.canRun ? `Start an instance of v${state.latest}` : "Running needs the designers or operators group");
    $("#version-badge").textContent = state.version ? "v" + state.version : "new";
    $("#wf-title").textContent = state.name;
    document.title = `${dirty ? "• " : ""}${state.name} · Editor · Steadyflow`;
  }

  function showBanner() {
    const banner = $("#banner");
    banner.innerHTML = "";
    const editorUrl = CFG.urls.editor;
    if (CFG.archived) {
      banner.append("This workflow is archived: it is read-only and starts no new instances. ",
        el("a", { href: CFG.urls.list + "?archived=1" }, "Unarchive it from the list."));
    } else if (state.version !== null && state.latest !== null && state.version !== state.latest) {
      banner.append(`You are looking at v${state.version} (read-only); the latest is v${state.latest}. `,
        el("a", { href: editorUrl, id: "open-latest" }, "Open the latest"));
      if (CFG.canSave) {
        banner.append(" or ", el("button", { type: "button", id: "banner-restore", class: "inline-button",
          onclick: () => restoreVersion(state.version) }, `Restore v${state.version} as a new version`));
      }
    } else if (!CFG.canSave) {
      banner.append("Read-only: changing workflows needs the designers group.");
    } else {
      banner.hidden = true;
      return;
    }
    banner.hidden = false;
  }

  // ---------------------------------------------------------------- editing operations

  function uniqueNodeId(type) {
    const taken = (id) => !cy.getElementById(id).empty();
    if ((type === "start" || type === "end") && !taken(type)) return type;
    let n = 1;
    while (taken(`${type}_${n}`)) n += 1;
    return `${type}_${n}`;
  }

  function modelPosition(clientX, clientY) {
    const rect = cy.container().getBoundingClientRect();
    const pan = cy.pan();
    const zoom = cy.zoom();
    return { x: (clientX - rect.left - pan.x) / zoom, y: (clientY - rect.top - pan.y) / zoom };
  }

  function freeSpot() {
    const ext = cy.extent();
    let p = { x: (ext.x1 + ext.x2) / 2, y: (ext.y1 + ext.y2) / 2 };
    for (let i = 0; i < 40; i += 1) {
      const clash = realNodes().some((n) => Math.abs(n.position("x") - p.x) < 90 && Math.abs(n.position("y") - p.y) < 50);
      if (!clash) break;
      p = { x: p.x + 40, y: p.y + 70 };
    }
    return p;
  }

  function addNode(type, position) {
    if (state.readOnly) return null;
    const node = { id: uniqueNodeId(type), type };
    const added = cy.add({ group: "nodes", data: G.nodeData(node, state.types), position: position || freeSpot() });
    cy.$(":selected").unselect();
    added.select();
    commit();
    return added;
  }

  function addEdge(source, target, when) {
    if (state.readOnly) return null;
    const edge = { source, target };
    if (when) edge.when = when;
    const added = cy.add({ group: "edges", data: G.edgeData(edge, newEdgeId()) });
    cy.$(":selected").unselect();
    added.select();
    commit();
    return added;
  }

  function deleteSelection() {
    if (state.readOnly) return;
    const selected = cy.$(":selected").filter(isReal);
    if (selected.empty()) return;
    selected.remove();
    commit();
    renderPanel();
  }

  /** Update one field of a node's JSON (`path` like "config.prompt" or "retry.max_attempts"). */
  function setNodeField(nodeId, path, value) {
    const node = cy.getElementById(nodeId);
    if (node.empty()) return;
    const data = clone(node.data("node")) || {};
    setPath(data, path.split("."), value);
    node.data("node", data);
    node.data("display", G.nodeData(Object.assign({ id: nodeId, type: node.data("type") }, data), state.types).display);
  }

  function setPath(obj, keys, value) {
    const [head, ...rest] = keys;
    if (rest.length === 0) {
      if (value === undefined) delete obj[head];
      else obj[head] = value;
      return;
    }
    if (typeof obj[head] !== "object" || obj[head] === null || Array.isArray(obj[head])) {
      if (value === undefined) return;
      obj[head] = {};
    }
    setPath(obj[head], rest, value);
    if (Object.keys(obj[head]).length === 0) delete obj[head];
  }

  function getPath(obj, path) {
    return path.split(".").reduce((o, k) => (o && typeof o === "object" ? o[k] : undefined), obj);
  }

  function renameNode(oldId, newId) {
    if (oldId === newId) return null;
    if (!ID_PATTERN.test(newId)) {
      return "an id starts with a letter or _ and holds only letters, digits, _ and - (64 at most)";
    }
    if (!cy.getElementById(newId).empty()) return `there is already a node '${newId}'`;
    const graph = toGraph();
    graph.nodes.forEach((n) => { if (n.id === oldId) n.id = newId; });
    graph.edges.forEach((e) => {
      if (e.source === oldId) e.source = newId;
      if (e.target === oldId) e.target = newId;
    });
    showGraph(graph, false);
    cy.getElementById(newId).select();
    commit();
    renderPanel();
    return null;
  }

  function setEdgeWhen(edge, when) {
    const rest = edge.data("edge") || {};
    const json = Object.assign({ source: edge.data("source"), target: edge.data("target") }, when ? { when } : {}, rest);
    edge.data("when", when || "");
    edge.data("conditional", when ? "yes" : "no");
    edge.data("display", G.edgeLabel(json));
  }

  function setEdgeLabel(edge, label) {
    const rest = clone(edge.data("edge")) || {};
    if (label) rest.label = label; else delete rest.label;
    edge.data("edge", rest);
    setEdgeWhen(edge, edge.data("when"));
  }

  function runLayout(direction) {
    if (state.readOnly) return;
    G.layout(cy, direction);
    commit();
  }

  function zoomBy(factor) {
    const rect = cy.container().getBoundingClientRect();
    cy.zoom({ level: Math.min(3, Math.max(0.15, cy.zoom() * factor)),
      renderedPosition: { x: rect.width / 2, y: rect.height / 2 } });
  }

  function setConnectMode(on) {
    if (state.readOnly || !eh) return;
    state.connectMode = on;
    if (on) eh.enableDrawMode(); else eh.disableDrawMode();
    $("#btn-connect").setAttribute("aria-pressed", on ? "true" : "false");
    $("#btn-connect").classList.toggle("active", on);
    cy.container().classList.toggle("connect-mode", on);
    hideHandle();
  }

  // ---------------------------------------------------------------- client-side schema checks

  function validator(key, schema) {
    if (!schemaCheck) return null;
    if (!compiled[key]) {
      try {
        compiled[key] = schemaCheck.compile(schema);
      } catch (exc) {
        compiled[key] = () => true; // a schema the checker cannot compile: leave it to the server's validator
      }
    }
    return compiled[key];
  }

  /** schema errors (Ajv's shape) as {path: message}: "config.prompt", "retry.max_attempts", "" for the whole object. */
  function schemaErrors(key, schema, value, prefix) {
    const validate = validator(key, schema);
    const out = {};
    if (!validate || validate(value)) return out;
    (validate.errors || []).forEach((e) => {
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

  // ---------------------------------------------------------------- side panel

  const panel = () => $("#panel");

  /** A form field bound to a value: kinds text, textarea, number, integer, select, lines, json, bool. */
  function field(spec) {
    const id = "f-" + spec.path.replace(/[^A-Za-z0-9_-]/g, "-");
    let input;
    const current = spec.value;
    if (spec.kind === "select" || spec.kind === "bool") {
      const options = spec.kind === "bool" ? ["true", "false"] : spec.options;
      input = el("select", { id, name: spec.path },
        el("option", { value: "" }, spec.placeholder || "—"),
        options.map((o) => el("option", { value: String(o), selected: current !== undefined && String(current) === String(o) }, String(o))));
    } else if (spec.kind === "textarea" || spec.kind === "json" || spec.kind === "lines") {
      let text = "";
      if (current !== undefined) {
        if (spec.kind === "json") text = JSON.stringify(current, null, 2);
        else if (spec.kind === "lines") text = (current || []).join("\n");
        else text = String(current);
      }
      input = el("textarea", { id, name: spec.path, rows: spec.rows || (spec.kind === "textarea" ? 5 : 3),
        spellcheck: spec.kind === "textarea" ? "true" : "false", placeholder: spec.placeholder,
        class: spec.kind === "textarea" ? "prompt" : "code" });
      input.value = text;
    } else {
      const number = spec.kind === "number" || spec.kind === "integer";
      input = el("input", { id, name: spec.path, type: number ? "number" : "text", autocomplete: "off",
        step: spec.kind === "integer" ? "1" : (number ? "any" : undefined), min: spec.min, max: spec.max,
        placeholder: spec.placeholder, class: spec.mono ? "code" : undefined });
      input.value = current === undefined || current === null ? "" : String(current);
    }
    if (state.readOnly) input.disabled = true;
    const error = el("div", { class: "field-error", "data-error-for": spec.path, id: id + "-error" });
    const row = el("div", { class: "field", "data-path": spec.path },
      el("label", { for: id }, spec.label, spec.required ? el("span", { class: "req", title: "required" }, " *") : null),
      input, spec.help ? el("div", { class: "help" }, spec.help) : null, error);
    input.setAttribute("aria-describedby", id + "-error");

    const parse = () => {
      const raw = input.value;
      if (spec.kind === "select") return { value: raw === "" ? undefined : raw };
      if (spec.kind === "bool") return { value: raw === "" ? undefined : raw === "true" };
      if (raw.trim() === "") return { value: undefined };
      if (spec.kind === "number" || spec.kind === "integer") {
        const n = Number(raw);
        return Number.isFinite(n) ? { value: n } : { error: "not a number" };
      }
      if (spec.kind === "lines") return { value: raw.split("\n").map((s) => s.trim()).filter(Boolean) };
      if (spec.kind === "json") {
        try {
          return { value: JSON.parse(raw) };
        } catch (exc) {
          return { error: "not valid JSON: " + exc.message };
        }
      }
      return { value: spec.trim === false ? raw : raw };
    };
    const onInput = () => {
      const parsed = parse();
      if (parsed.error) {
        state.parseErrors.add(spec.path);
        showFieldError(spec.path, parsed.error);
        return;
      }
      state.parseErrors.delete(spec.path);
      spec.apply(parsed.value);
      if (spec.check) spec.check(parsed.value);
      refreshPanelIssues();
    };
    input.addEventListener(spec.kind === "select" || spec.kind === "bool" ? "change" : "input", onInput);
    input.addEventListener("change", () => { if (!state.parseErrors.has(spec.path)) commit(); });
    return row;
  }

  function showFieldError(path, message) {
    const box = panel().querySelector(`[data-error-for="${CSS.escape(path)}"]`);
    if (!box) return false;
    box.textContent = message || "";
    box.closest(".field").classList.toggle("invalid", Boolean(message));
    return true;
  }

  function section(title, ...children) {
    return el("section", { class: "panel-section" }, el("h3", {}, title), ...children);
  }

  /** A form for a JSON Schema object's properties (the node type's config schema). */
  function schemaFields(schema, value, pathPrefix, apply) {
    const props = (schema && schema.properties) || {};
    const required = new Set((schema && schema.required) || []);
    return Object.entries(props).map(([key, prop]) => {
      const path = pathPrefix + "." + key;
      const spec = { path, label: prop.title || key, required: required.has(key), value: value ? value[key] : undefined,
        apply: (v) => apply(key, v) };
      if (prop.default !== undefined) spec.placeholder = `default: ${JSON.stringify(prop.default)}`;
      if (Array.isArray(prop.enum)) Object.assign(spec, { kind: "select", options: prop.enum,
        placeholder: prop.default !== undefined ? `— (default ${prop.default})` : "—" });
      else if (prop.type === "string") spec.kind = prop.format === "textarea" ? "textarea" : "text";
      else if (prop.type === "integer") Object.assign(spec, { kind: "integer", min: prop.minimum, max: prop.maximum });
      else if (prop.type === "number") Object.assign(spec, { kind: "number", min: prop.minimum, max: prop.maximum });
      else if (prop.type === "boolean") spec.kind = "bool";
      else if (prop.type === "array" && prop.items && prop.items.type === "string") {
        Object.assign(spec, { kind: "lines", help: "one per line", rows: 3 });
      } else Object.assign(spec, { kind: "json", help: "JSON" + (prop.type ? ` (${prop.type})` : "") });
      if (spec.kind === "text" && /url|function|model/i.test(key)) spec.mono = true;
      return field(spec);
    });
  }

  function issuesBox(list) {
    if (!list.length) return null;
    return el("ul", { class: "panel-issues", id: "panel-issues" }, list.map((i) => el("li", {}, i.message)));
  }

  function renderPanel() {
    const box = panel();
    box.innerHTML = "";
    state.parseErrors.clear();
    const selected = cy.$(":selected").filter(isReal);
    if (selected.length === 1 && selected.isNode()) box.append(nodePanel(selected[0]));
    else if (selected.length === 1 && selected.isEdge()) box.append(edgePanel(selected[0]));
    else if (selected.length > 1) box.append(multiPanel(selected));
    else box.append(graphPanel());
    refreshPanelIssues();
    updateToolbar();
  }

  function nodePanel(node) {
    const id = node.id();
    const type = state.types[node.data("type")] || { name: node.data("type"), label: node.data("type"), schema: {} };
    const data = node.data("node") || {};
    const apply = (path) => (v) => setNodeField(id, path, v);
    const header = el("div", { class: "panel-head" },
      el("span", { class: "type-chip", style: `background:${type.color || "#64748b"}` }, type.icon || "■"),
      el("div", {}, el("h2", {}, id), el("div", { class: "muted" }, `${type.label || type.name} node`)));
    const idField = el("div", { class: "field", "data-path": "id" },
      el("label", { for: "f-id" }, "Id", el("span", { class: "req" }, " *")),
      el("input", { id: "f-id", value: id, autocomplete: "off", class: "code", disabled: state.readOnly,
        onchange: (e) => {
          const problem = renameNode(id, e.target.value.trim());
          if (problem) showFieldError("id", problem);
        },
        oninput: (e) => {
          const v = e.target.value.trim();
          showFieldError("id", v === id || ID_PATTERN.test(v) ? (v !== id && !cy.getElementById(v).empty()
            ? `there is already a node '${v}'` : "") : "letters, digits, _ and -; starting with a letter or _");
        } }),
      el("div", { class: "field-error", "data-error-for": "id" }));
    const nodeFields = [
      idField,
      field({ path: "label", label: "Label", kind: "text", value: data.label, apply: apply("label"),
        placeholder: "shown instead of the id" }),
    ];
    const config = data.config || {};
    const hasConfig = type.schema && type.schema.properties && Object.keys(type.schema.properties).length;
    const configSection = section("Config",
      el("div", { class: "field-error section-error", "data-error-for": "config" }),
      hasConfig ? schemaFields(type.schema, config, "config", (key, v) => setNodeField(id, "config." + key, v))
        : el("p", { class: "muted" }, "This node type has no settings."));
    const sections = [section("Node", ...nodeFields), configSection];
    if (!type.structural) {
      sections.push(section("Execution",
        field({ path: "queue", label: "Queue", kind: "select", options: CFG.queues, value: data.queue,
          placeholder: `— (the type's default: ${type.default_queue || "default"})`, apply: apply("queue") }),
        field({ path: "timeout_s", label: "Timeout (s)", kind: "number", value: data.timeout_s, apply: apply("timeout_s"),
          placeholder: "server default" }),
        field({ path: "retry.max_attempts", label: "Retry: max attempts", kind: "integer", min: 1, max: 100,
          value: getPath(data, "retry.max_attempts"), apply: apply("retry.max_attempts") }),
        field({ path: "retry.backoff_s", label: "Retry: backoff (s)", kind: "number", min: 0,
          value: getPath(data, "retry.backoff_s"), apply: apply("retry.backoff_s") }),
        field({ path: "retry.max_backoff_s", label: "Retry: max backoff (s)", kind: "number", min: 0,
          value: getPath(data, "retry.max_backoff_s"), apply: apply("retry.max_backoff_s") }),
        field({ path: "retry.jitter", label: "Retry: jitter", kind: "bool", value: getPath(data, "retry.jitter"),
          apply: apply("retry.jitter") })));
      sections.push(section("Fallback",
        field({ path: "fallback.mode", label: "When the provider's circuit is open", kind: "select",
          options: ["rule", "review"], value: getPath(data, "fallback.mode"), apply: apply("fallback.mode"),
          placeholder: "— (halt into review)" }),
        field({ path: "fallback.route", label: "Rule: route", kind: "text", value: getPath(data, "fallback.route"),
          apply: apply("fallback.route") }),
        field({ path: "fallback.output", label: "Rule: output (JSON)", kind: "json", value: getPath(data, "fallback.output"),
          apply: apply("fallback.output") }),
        field({ path: "compensate", label: "Compensate (JSON)", kind: "json", value: data.compensate,
          apply: apply("compensate"), help: "run if the instance fails after this step succeeded" })));
    }
    const incoming = node.incomers("edge").filter(isReal);
    if (incoming.length > 1 || data.join) {
      sections.push(section("Join",
        field({ path: "join", label: `Start when (${incoming.length} incoming edges)`, kind: "select",
          options: ["all", "any"], value: data.join, apply: apply("join"), placeholder: "— (all: wait for every branch)" })));
    }
    sections.push(connectionsSection(node));
    const actions = state.readOnly ? null : el("div", { class: "panel-actions" },
      el("button", { type: "button", class: "danger", id: "panel-delete", onclick: deleteSelection }, "Delete node"));
    return el("div", { class: "node-panel", "data-node": id }, header,
      el("div", { id: "panel-issues-slot" }), ...sections, actions);
  }

  function connectionsSection(node) {
    const out = node.outgoers("edge").filter(isReal);
    const list = el("ul", { class: "connections" }, out.map((e) => el("li", {},
      el("button", { type: "button", class: "link-button", onclick: () => { cy.$(":selected").unselect(); e.select(); } },
        `→ ${e.data("target")}`), e.data("when") ? el("code", {}, ` when ${e.data("when")}`) : " (always)")));
    const children = [out.length ? list : el("p", { class: "muted" }, "No outgoing edges.")];
    if (!state.readOnly) {
      const targets = realNodes().filter((n) => n.id() !== node.id()).map((n) => n.id()).sort();
      const select = el("select", { id: "connect-target", "aria-label": "Connect to" },
        targets.map((t) => el("option", { value: t }, t)));
      children.push(el("div", { class: "connect-row" }, select,
        el("button", { type: "button", id: "connect-add", onclick: () => {
          if (select.value) addEdge(node.id(), select.value);
          renderPanel();
        } }, "Add edge")));
    }
    return section("Outgoing edges", ...children);
  }

  const checkExpression = debounce(async (edgeId, text) => {
    const res = await api("POST", CFG.urls.checkExpression, { expression: text });
    const edge = cy.getElementById(edgeId);
    if (edge.empty() || edge.data("when") !== text) return; // the text changed meanwhile
    const status = $("#when-status");
    if (!status) return;
    if (!res.ok) {
      status.textContent = res.data.message;
      status.className = "when-status bad";
      return;
    }
    status.textContent = res.data.valid ? (res.data.empty ? "no condition: always fires" : "✓ condition parses")
      : res.data.message;
    status.className = "when-status " + (res.data.valid ? "good" : "bad");
    const fieldRow = status.closest(".field");
    if (fieldRow) fieldRow.classList.toggle("invalid", !res.data.valid);
  }, 150);

  function edgePanel(edge) {
    const header = el("div", { class: "panel-head" },
      el("span", { class: "type-chip edge-chip" }, "→"),
      el("div", {}, el("h2", {}, `${edge.data("source")} → ${edge.data("target")}`),
        el("div", { class: "muted" }, "Edge")));
    const whenInput = el("input", { id: "f-when", name: "when", class: "code", autocomplete: "off",
      placeholder: "e.g. route == 'search' (empty: always fires)", disabled: state.readOnly });
    whenInput.value = edge.data("when") || "";
    whenInput.addEventListener("input", () => {
      setEdgeWhen(edge, whenInput.value.trim());
      $("#when-status").textContent = "checking…";
      $("#when-status").className = "when-status";
      checkExpression(edge.id(), whenInput.value.trim());
    });
    whenInput.addEventListener("change", commit);
    const whenField = el("div", { class: "field", "data-path": "when" },
      el("label", { for: "f-when" }, "Condition (when)"), whenInput,
      el("div", { class: "when-status", id: "when-status", "aria-live": "polite" }),
      el("div", { class: "help" }, "Names: the source's output fields (route, …), output, context, steps, input."));
    checkExpression(edge.id(), edge.data("when") || "");
    const labelField = field({ path: "edge.label", label: "Label", kind: "text", value: (edge.data("edge") || {}).label,
      apply: (v) => setEdgeLabel(edge, v), placeholder: "shown instead of the condition" });
    const actions = state.readOnly ? null : el("div", { class: "panel-actions" },
      el("button", { type: "button", class: "danger", id: "panel-delete", onclick: deleteSelection }, "Delete edge"));
    return el("div", { class: "edge-panel", "data-edge": edge.id() }, header, el("div", { id: "panel-issues-slot" }),
      section("Edge", whenField, labelField), actions);
  }

  function multiPanel(selected) {
    const nodes = selected.nodes().length;
    const edges = selected.edges().length;
    return el("div", {}, el("div", { class: "panel-head" }, el("h2", {}, "Selection")),
      el("p", {}, `${nodes} node${nodes === 1 ? "" : "s"} and ${edges} edge${edges === 1 ? "" : "s"} selected.`),
      el("p", { class: "muted" }, "Drag one to move them all; Delete removes them."),
      state.readOnly ? null : el("button", { type: "button", class: "danger", id: "panel-delete", onclick: deleteSelection },
        "Delete selection"));
  }

  function graphPanel() {
    const s = state.settings;
    const applySetting = (key) => (v) => {
      if (v === undefined) delete state.settings[key]; else state.settings[key] = v;
    };
    const nodes = realNodes().length;
    const edges = realEdges().length;
    return el("div", { class: "graph-panel" },
      el("div", { class: "panel-head" }, el("h2", {}, "Workflow"),
        el("div", { class: "muted" }, `${nodes} nodes, ${edges} edges · click a node or an edge to edit it`)),
      el("div", { id: "panel-issues-slot" }),
      section("Definition",
        field({ path: "meta.name", label: "Name", kind: "text", required: true, value: state.name,
          apply: (v) => { state.name = v || ""; updateToolbar(); } }),
        field({ path: "meta.description", label: "Description", kind: "textarea", rows: 3, value: state.description,
          apply: (v) => { state.description = v || ""; } })),
      section("Limits",
        field({ path: "settings.max_transitions", label: "Max transitions (loop breaker)", kind: "integer", min: 1,
          value: s.max_transitions, apply: applySetting("max_transitions"), placeholder: "server default" }),
        field({ path: "settings.ttl_s", label: "TTL (s)", kind: "number", value: s.ttl_s, apply: applySetting("ttl_s"),
          placeholder: "server default" }),
        field({ path: "settings.max_concurrency", label: "Max concurrent steps", kind: "integer", min: 1,
          value: s.max_concurrency, apply: applySetting("max_concurrency"), placeholder: "server default" }),
        field({ path: "settings.budget_usd", label: "Budget (USD)", kind: "number", min: 0, value: s.budget_usd,
          apply: applySetting("budget_usd"), placeholder: "no budget" }),
        field({ path: "settings.budget_tokens", label: "Budget (tokens)", kind: "integer", min: 0, value: s.budget_tokens,
          apply: applySetting("budget_tokens"), placeholder: "no budget" })));
  }

  /** Field errors from the schemas (as typed) and the last server validation for what the panel shows. */
  function refreshPanelIssues() {
    const box = panel();
    const errors = {};
    let serverIssues = [];
    const nodeDiv = box.querySelector(".node-panel");
    const edgeDiv = box.querySelector(".edge-panel");
    if (nodeDiv) {
      const node = cy.getElementById(nodeDiv.dataset.node);
      if (node.empty()) return;
      const type = state.types[node.data("type")];
      const json = Object.assign({ id: node.id(), type: node.data("type") }, node.data("node"));
      Object.assign(errors, schemaErrors("node", CFG.shapes.node, json, ""));
      if (type) Object.assign(errors, schemaErrors("type:" + type.name, type.schema, json.config || {}, "config"));
      const fb = json.fallback;
      if (fb && fb.mode === "rule" && fb.route === undefined && fb.output === undefined) {
        errors["fallback.route"] = "a rule fallback needs a route or an output";
      }
      serverIssues = state.issues.filter((i) => i.ids.includes(node.id()));
    } else if (edgeDiv) {
      serverIssues = state.issues.filter((i) => i.ids.includes(edgeDiv.dataset.edge));
    } else if (box.querySelector(".graph-panel")) {
      Object.assign(errors, schemaErrors("settings", CFG.shapes.settings, state.settings, "settings"));
      if (!state.name.trim()) errors["meta.name"] = "required";
      serverIssues = state.issues.filter((i) => !i.ids.length);
    }
    box.querySelectorAll(".field-error").forEach((e) => {
      const path = e.dataset.errorFor;
      if (state.parseErrors.has(path) || path === "id") return;
      e.textContent = "";
      const row = e.closest(".field");
      if (row) row.classList.remove("invalid");
    });
    Object.entries(errors).forEach(([path, message]) => {
      if (state.parseErrors.has(path)) return;
      if (!showFieldError(path, message)) {
        // No field of that name (e.g. an unknown key): show it on its section.
        const section = path.startsWith("config") ? "config" : null;
        if (section) showFieldError(section, `${path}: ${message}`);
      }
    });
    const slot = box.querySelector("#panel-issues-slot");
    if (slot) {
      slot.innerHTML = "";
      const issues = issuesBox(serverIssues);
      if (issues) slot.append(issues);
    }
  }

  // ---------------------------------------------------------------- server validation

  function clearIssueMarks() {
    if (cy) cy.elements().removeClass("has-error");
  }

  /** Run the server's validator on the canvas; mark and list what it finds. Returns true when valid. */
  async function validate(options) {
    const opts = options || {};
    const edgeIds = realEdges().map((e) => e.id());
    const res = await api("POST", CFG.urls.validate, { graph: toGraph() });
    if (!res.ok) {
      toast("Validation failed: " + res.data.message, "error");
      return false;
    }
    showIssues(res.data.errors || [], edgeIds);
    if (!opts.quiet) {
      if (res.data.valid) toast("✓ The graph is valid", "ok");
      else toast(`${res.data.errors.length} problem${res.data.errors.length === 1 ? "" : "s"} found`, "error");
    }
    return res.data.valid;
  }

  const revalidateSoon = debounce(() => validate({ quiet: true }), 400);

  function showIssues(errors, edgeIds) {
    clearIssueMarks();
    state.issues = errors.map((issue) => {
      const ids = [];
      if (issue.node && !cy.getElementById(issue.node).empty()) ids.push(issue.node);
      if (typeof issue.edge === "number" && edgeIds[issue.edge]) ids.push(edgeIds[issue.edge]);
      // A cycle names every node on it in its message: mark them all, and the edges between them.
      const cycle = /cycle ([^:]+):/.exec(issue.message);
      if (cycle) {
        const names = cycle[1].split(" -> ").map((s) => s.trim());
        names.forEach((n, i) => {
          if (!cy.getElementById(n).empty() && !ids.includes(n)) ids.push(n);
          if (i + 1 < names.length) {
            realEdges().filter((e) => e.data("source") === n && e.data("target") === names[i + 1] && !e.data("when"))
              .forEach((e) => { if (!ids.includes(e.id())) ids.push(e.id()); });
          }
        });
      }
      return Object.assign({}, issue, { ids });
    });
    state.issues.forEach((i) => i.ids.forEach((id) => cy.getElementById(id).addClass("has-error")));
    const list = $("#problems-list");
    list.innerHTML = "";
    state.issues.forEach((issue) => {
      list.append(el("li", { class: issue.ids.length ? "clickable" : "", onclick: () => focusIssue(issue) }, issue.message));
    });
    const box = $("#problems");
    box.classList.toggle("ok", errors.length === 0);
    $("#problems-title").textContent = errors.length ? `Problems (${errors.length})` : "✓ No problems";
    box.hidden = false;
    state.issuesShown = errors.length > 0;
    if (!errors.length) setTimeout(() => { if (!state.issuesShown) box.hidden = true; }, 2500);
    refreshPanelIssues();
  }

  function focusIssue(issue) {
    if (!issue.ids.length) return;
    const eles = cy.collection(issue.ids.map((id) => cy.getElementById(id)));
    cy.$(":selected").unselect();
    eles.first().select();
    cy.animate({ center: { eles }, duration: 200 });
  }

  // ---------------------------------------------------------------- save, versions, diff, restore

  async function openSave() {
    if (state.readOnly) return;
    if (state.parseErrors.size) {
      toast("Fix the fields marked in red first (they do not parse).", "error");
      return;
    }
    if (!state.name.trim()) {
      toast("The workflow needs a name.", "error");
      return;
    }
    const valid = await validate({ quiet: true });
    if (!valid) {
      toast("The graph has problems: fix them before saving (see the list).", "error");
      return;
    }
    $("#save-summary").textContent = state.latest === null ? `This will be v1 of ${state.name}.`
      : `This will be v${state.latest + 1} of ${state.name} (you started from v${state.version}).`;
    $("#save-error").hidden = true;
    $("#save-force").hidden = true;
    $("#save-message").value = "";
    $("#save-dialog").showModal();
    $("#save-message").focus();
  }

  async function doSave(force) {
    const message = $("#save-message").value.trim();
    const err = $("#save-error");
    if (!message) {
      err.textContent = "Say what changed: the message is kept with the version.";
      err.hidden = false;
      return;
    }
    $("#save-confirm").disabled = true;
    const snap = snapshot();
    const body = { graph: toGraph(), message, name: state.name.trim(), description: state.description,
      base_version: state.version };
    if (force) body.force = true;
    const res = await api("POST", CFG.urls.versions, body);
    $("#save-confirm").disabled = false;
    if (res.status === 201) {
      state.version = state.latest = res.data.version.number;
      state.saved = snap;
      $("#save-dialog").close();
      if (new URL(location.href).searchParams.has("version")) history.replaceState(null, "", CFG.urls.editor);
      updateToolbar();
      toast(`Saved v${state.version}`, "ok");
      return;
    }
    if (res.status === 400 && res.data.errors) showIssues(res.data.errors, realEdges().map((e) => e.id()));
    err.textContent = res.data.message || `saving failed (${res.status})`;
    err.hidden = false;
    $("#save-force").hidden = res.status !== 409;
  }

  async function openVersions() {
    const res = await api("GET", CFG.urls.versions);
    if (!res.ok) {
      toast(res.data.message, "error");
      return;
    }
    const body = $("#versions-body");
    body.innerHTML = "";
    const versions = res.data.versions;
    versions.forEach((v) => {
      const current = v.number === state.version;
      body.append(el("tr", { class: current ? "current" : "", "data-version": v.number },
        el("td", {}, el("strong", {}, "v" + v.number), current ? el("span", { class: "badge" }, "open") : null),
        el("td", {}, v.message || "—"),
        el("td", {}, v.created_by || "—"),
        el("td", {}, new Date(v.created_at).toLocaleString()),
        el("td", {}, String(v.instances)),
        el("td", { class: "actions" },
          current ? null : el("a", { href: `${CFG.urls.editor}?version=${v.number}`, class: "button" }, "Open"),
          CFG.canSave && v.number !== state.latest ? el("button", { type: "button", class: "restore",
            onclick: () => restoreVersion(v.number) }, "Restore") : null)));
    });
    const from = $("#diff-from");
    const to = $("#diff-to");
    from.innerHTML = "";
    to.innerHTML = "";
    versions.forEach((v) => {
      from.append(el("option", { value: v.number }, "v" + v.number));
      to.append(el("option", { value: v.number }, "v" + v.number));
    });
    if (versions.length > 1) {
      from.value = String(state.version && state.version > 1 ? state.version - 1 : versions[1].number);
      to.value = String(state.version || versions[0].number);
    }
    $("#diff-result").hidden = true;
    $("#versions-dialog").showModal();
  }

  async function restoreVersion(number) {
    if (isDirty() && !confirm("Restoring discards your unsaved changes. Continue?")) return;
    const res = await api("POST", `${CFG.urls.version}${number}/restore`, {});
    if (!res.ok) {
      toast(res.data.message, "error");
      return;
    }
    state.saved = state.undo[state.undoIndex]; // leave without the unsaved-changes prompt
    location.href = CFG.urls.editor + "#restored-" + res.data.version.number;
  }

  async function runDiff() {
    const from = $("#diff-from").value;
    const to = $("#diff-to").value;
    const res = await api("GET", `${CFG.urls.diff}?from=${from}&to=${to}`);
    const box = $("#diff-result");
    box.innerHTML = "";
    box.hidden = false;
    if (!res.ok) {
      box.append(el("p", { class: "error" }, res.data.message));
      return;
    }
    const d = res.data;
    const edgeText = (e) => `${e.source} → ${e.target}${e.when ? ` when ${e.when}` : ""}`;
    const rows = [];
    d.nodes.added.forEach((id) => rows.push(["added", "node", id]));
    d.nodes.removed.forEach((id) => rows.push(["removed", "node", id]));
    d.nodes.changed.forEach((c) => rows.push(["changed", "node", `${c.id} (${c.fields.join(", ")})`]));
    d.nodes.moved.forEach((id) => rows.push(["moved", "node", id]));
    d.edges.added.forEach((e) => rows.push(["added", "edge", edgeText(e)]));
    d.edges.removed.forEach((e) => rows.push(["removed", "edge", edgeText(e)]));
    d.edges.changed.forEach((e) => rows.push(["changed", "edge", `${edgeText(e.before)} ⇒ ${edgeText(e)}`]));
    Object.entries(d.settings).forEach(([k, [a, b]]) => rows.push(["changed", "setting",
      `${k}: ${JSON.stringify(a)} ⇒ ${JSON.stringify(b)}`]));
    box.append(el("h3", {}, `v${d.from} → v${d.to}`));
    if (!rows.length) box.append(el("p", { class: "muted" }, d.identical ? "The two versions are identical."
      : "No differences in nodes, edges or settings."));
    else {
      box.append(el("ul", { class: "diff-list" }, rows.map(([kind, what, text]) =>
        el("li", { class: "diff-" + kind }, el("span", { class: "diff-kind" }, `${kind} ${what}`), " ", text))));
    }
    // Show the change on the canvas when it displays the newer side.
    cy.elements().removeClass("diff-added diff-changed diff-moved");
    if (Number(to) === state.version && !isDirty()) {
      d.nodes.added.forEach((id) => cy.getElementById(id).addClass("diff-added"));
      d.nodes.changed.forEach((c) => cy.getElementById(c.id).addClass("diff-changed"));
      d.nodes.moved.forEach((id) => cy.getElementById(id).addClass("diff-moved"));
      const mark = (list, cls) => list.forEach((e) => realEdges().filter((x) => x.data("source") === e.source
        && x.data("target") === e.target && (x.data("when") || null) === (e.when || null)).addClass(cls));
      mark(d.edges.added, "diff-added");
      mark(d.edges.changed, "diff-changed");
      box.append(el("p", { class: "muted" }, "Highlighted on the canvas: green added, amber changed, blue moved."));
    }
  }

  // ---------------------------------------------------------------- import / export / run

  function exportJson() {
    const doc = Object.assign({ slug: CFG.slug, name: state.name, description: state.description }, toGraph());
    const blob = new Blob([JSON.stringify(doc, null, 2) + "\n"], { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob),
      download: `${CFG.slug}${state.version ? "-v" + state.version : ""}${isDirty() ? "-draft" : ""}.json` });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  /** Check an imported document's shape well enough to draw it; the server's validator says the rest. */
  function parseImport(text) {
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
      if (!e || typeof e !== "object" || !ids.has(e.source) || !ids.has(e.target)) {
        return { error: `edge ${i + 1} must join two of the file's nodes (source and target).` };
      }
    }
    if (doc.settings !== undefined && (typeof doc.settings !== "object" || Array.isArray(doc.settings))) {
      return { error: "'settings' must be an object." };
    }
    const graph = { nodes: doc.nodes, edges: doc.edges || [] };
    if (doc.settings) graph.settings = doc.settings;
    return { graph, doc };
  }

  function doImport() {
    const parsed = parseImport($("#import-text").value);
    const err = $("#import-error");
    if (parsed.error) {
      err.textContent = parsed.error;
      err.hidden = false;
      return;
    }
    showGraph(parsed.graph, false);
    if (!G.hasPositions(parsed.graph)) G.layout(cy, "LR");
    else G.fit(cy);
    commit();
    renderPanel();
    $("#import-dialog").close();
    toast(`Imported ${parsed.graph.nodes.length} nodes and ${parsed.graph.edges.length} edges`, "ok");
    validate({ quiet: true });
  }

  function checkRunInput() {
    const text = $("#run-input").value;
    const err = $("#run-error");
    let problem = null;
    try {
      const value = JSON.parse(text || "{}");
      if (!value || typeof value !== "object" || Array.isArray(value)) problem = "The start input must be a JSON object ({…}).";
    } catch (exc) {
      problem = "Not valid JSON: " + exc.message;
    }
    err.textContent = problem || "";
    err.hidden = !problem;
    $("#run-confirm").disabled = Boolean(problem);
    return !problem;
  }

  function openRun() {
    if (!CFG.canRun || state.latest === null) return;
    $("#run-version").textContent = `${state.name} v${state.latest}`;
    $("#run-dirty").hidden = !isDirty();
    checkRunInput();
    $("#run-dialog").showModal();
    $("#run-input").focus();
  }

  async function doRun() {
    if (!checkRunInput()) return;
    $("#run-confirm").disabled = true;
    const res = await api("POST", CFG.urls.start, { input: JSON.parse($("#run-input").value || "{}") });
    $("#run-confirm").disabled = false;
    if (res.status === 201) {
      state.saved = state.undo[state.undoIndex]; // a run is not an edit: leave without asking
      location.href = CFG.urls.instance.replace("{id}", res.data.id);
      return;
    }
    const err = $("#run-error");
    err.textContent = res.data.message || `starting failed (${res.status})`;
    err.hidden = false;
  }

  // ---------------------------------------------------------------- palette

  function buildPalette() {
    const box = $("#palette-items");
    state.typeOrder.forEach((name) => {
      const t = state.types[name];
      const item = el("button", { type: "button", class: "palette-item", "data-type": name, disabled: state.readOnly,
        title: state.readOnly ? t.label : `Add a ${t.label} node (drag onto the canvas, or click)` },
        el("span", { class: "type-chip", style: `background:${t.color}` }, t.icon), el("span", {}, t.label));
      let dragged = false;
      item.addEventListener("pointerdown", (down) => {
        if (state.readOnly || down.button !== 0) return;
        dragged = false;
        let ghost = null;
        const move = (e) => {
          if (!ghost && Math.hypot(e.clientX - down.clientX, e.clientY - down.clientY) > 5) {
            ghost = el("div", { class: "palette-ghost", style: `background:${t.color}` }, `${t.icon} ${t.label}`);
            document.body.append(ghost);
          }
          if (ghost) {
            ghost.style.left = e.clientX + "px";
            ghost.style.top = e.clientY + "px";
          }
        };
        const up = (e) => {
          document.removeEventListener("pointermove", move);
          document.removeEventListener("pointerup", up);
          if (!ghost) return;
          ghost.remove();
          dragged = true;
          const rect = cy.container().getBoundingClientRect();
          if (e.clientX >= rect.left && e.clientX <= rect.right && e.clientY >= rect.top && e.clientY <= rect.bottom) {
            addNode(name, modelPosition(e.clientX, e.clientY));
            renderPanel();
          }
        };
        document.addEventListener("pointermove", move);
        document.addEventListener("pointerup", up);
      });
      item.addEventListener("click", () => {
        if (dragged) { dragged = false; return; }
        addNode(name);
        renderPanel();
      });
      box.append(item);
    });
  }

  // ---------------------------------------------------------------- edge drawing handle

  let handleNode = null;
  let hideTimer = null;
  const handle = () => $("#edge-handle");

  function showHandle(node) {
    if (state.readOnly || state.connectMode || (eh && eh.active)) return;
    clearTimeout(hideTimer);
    handleNode = node;
    const bb = node.renderedBoundingBox({ includeLabels: false, includeOverlays: false, includeUnderlays: false });
    const h = handle();
    h.style.left = (bb.x2 - 8) + "px";
    h.style.top = ((bb.y1 + bb.y2) / 2 - 8) + "px";
    h.dataset.node = node.id();
    h.hidden = false;
  }

  function hideHandle() {
    clearTimeout(hideTimer);
    handle().hidden = true;
  }

  function setupHandle() {
    const h = handle();
    h.addEventListener("pointerenter", () => clearTimeout(hideTimer));
    h.addEventListener("pointerleave", () => {
      clearTimeout(hideTimer);
      hideTimer = setTimeout(hideHandle, 300);
    });
    h.addEventListener("pointerdown", (down) => {
      if (!handleNode || down.button !== 0) return;
      down.preventDefault();
      down.stopPropagation();
      const source = handleNode;
      hideHandle();
      eh.start(source);
      const move = (e) => eh.update(modelPosition(e.clientX, e.clientY));
      const up = (e) => {
        document.removeEventListener("pointermove", move);
        document.removeEventListener("pointerup", up);
        // Snap to the node under the pointer now: edgehandles' own snapping is throttled.
        eh.update(modelPosition(e.clientX, e.clientY));
        eh.snap();
        eh.stop();
      };
      document.addEventListener("pointermove", move);
      document.addEventListener("pointerup", up);
    });
    // mousemove too: after a gesture that began on the handle, cytoscape's hover tracking has not seen
    // the pointer leave the source node, so hovering it again emits no new mouseover.
    cy.on("mouseover mousemove", "node", (e) => {
      if (isReal(e.target) && (handle().hidden || handleNode !== e.target)) showHandle(e.target);
    });
    cy.on("mouseout", "node", (e) => {
      if (e.target !== handleNode) return;
      clearTimeout(hideTimer);
      hideTimer = setTimeout(hideHandle, 400);
    });
    cy.on("viewport", hideHandle);
    // Leaving the canvas emits no mouseout on the node: hide unless the pointer went onto the handle.
    cy.container().addEventListener("mouseleave", () => {
      clearTimeout(hideTimer);
      hideTimer = setTimeout(hideHandle, 300);
    });
    cy.on("drag remove", "node", (e) => { if (e.target === handleNode) hideHandle(); });
  }

  // ---------------------------------------------------------------- keyboard

  function onKey(e) {
    const tag = (e.target.tagName || "").toLowerCase();
    const typing = tag === "input" || tag === "textarea" || tag === "select" || e.target.isContentEditable;
    const mod = e.ctrlKey || e.metaKey;
    const key = e.key.toLowerCase();
    if (mod && key === "s") {
      e.preventDefault();
      if (typing) e.target.dispatchEvent(new Event("change", { bubbles: true }));
      openSave();
      return;
    }
    if (typing || document.querySelector("dialog[open]")) return;
    if (mod && key === "z" && !e.shiftKey) { e.preventDefault(); undo(); return; }
    if ((mod && key === "z" && e.shiftKey) || (mod && key === "y")) { e.preventDefault(); redo(); return; }
    if (mod && key === "a") { e.preventDefault(); cy.elements().filter(isReal).select(); return; }
    if (mod || e.altKey) return;
    if (e.key === "Delete" || e.key === "Backspace") { e.preventDefault(); deleteSelection(); return; }
    if (e.key === "Escape") { setConnectMode(false); cy.$(":selected").unselect(); return; }
    if (key === "c") { setConnectMode(!state.connectMode); return; }
    if (key === "f") { G.fit(cy); return; }
    if (e.key === "+" || e.key === "=") { zoomBy(1.2); return; }
    if (e.key === "-") { zoomBy(1 / 1.2); return; }
    const arrows = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    if (arrows[e.key] && !state.readOnly) {
      const nodes = cy.$("node:selected").filter(isReal);
      if (nodes.empty()) return;
      e.preventDefault();
      const step = e.shiftKey ? 50 : 10;
      nodes.shift({ x: arrows[e.key][0] * step, y: arrows[e.key][1] * step });
      commit();
    }
  }

  // ---------------------------------------------------------------- wiring

  function bindToolbar() {
    const on = (id, fn) => $(id).addEventListener("click", fn);
    on("#btn-undo", undo);
    on("#btn-redo", redo);
    on("#btn-delete", deleteSelection);
    on("#btn-connect", () => setConnectMode(!state.connectMode));
    on("#btn-layout-lr", () => runLayout("LR"));
    on("#btn-layout-tb", () => runLayout("TB"));
    on("#btn-fit", () => G.fit(cy));
    on("#btn-zoom-in", () => zoomBy(1.2));
    on("#btn-zoom-out", () => zoomBy(1 / 1.2));
    on("#btn-validate", () => validate());
    on("#btn-save", openSave);
    on("#btn-versions", openVersions);
    on("#btn-export", exportJson);
    on("#btn-import", () => {
      $("#import-error").hidden = true;
      $("#import-text").value = "";
      $("#import-file").value = "";
      $("#import-dialog").showModal();
    });
    on("#btn-run", openRun);
    on("#problems-close", () => { $("#problems").hidden = true; state.issuesShown = false; });

    $("#save-form").addEventListener("submit", (e) => { e.preventDefault(); doSave(false); });
    on("#save-force", () => doSave(true));
    on("#save-cancel", () => $("#save-dialog").close());
    $("#run-form").addEventListener("submit", (e) => { e.preventDefault(); doRun(); });
    $("#run-input").addEventListener("input", checkRunInput);
    on("#run-cancel", () => $("#run-dialog").close());
    on("#versions-close", () => $("#versions-dialog").close());
    on("#diff-run", runDiff);
    $("#import-form").addEventListener("submit", (e) => { e.preventDefault(); doImport(); });
    on("#import-cancel", () => $("#import-dialog").close());
    $("#import-file").addEventListener("change", async (e) => {
      const file = e.target.files[0];
      if (file) $("#import-text").value = await file.text();
    });
    document.addEventListener("keydown", onKey);
    window.addEventListener("beforeunload", (e) => {
      if (isDirty()) {
        e.preventDefault();
        e.returnValue = "";
      }
    });
  }

  function starterGraph() {
    return { nodes: [{ id: "start", type: "start", position: { x: 0, y: 0 } },
      { id: "end", type: "end", position: { x: 420, y: 0 } }], edges: [] };
  }

  async function init() {
    // static/js/schema-check.js: Ajv's interface and messages without its eval (the CSP forbids eval).
    if (window.SchemaCheck) schemaCheck = window.SchemaCheck;
    const typesRes = await api("GET", CFG.urls.nodeTypes);
    if (!typesRes.ok) {
      $("#panel").textContent = "Could not load the node types: " + typesRes.data.message;
      return;
    }
    typesRes.data.node_types.forEach((t) => {
      state.types[t.name] = t;
      state.typeOrder.push(t.name);
    });
    const order = ["start", "llm", "router", "http", "python", "human", "wait", "end"];
    state.typeOrder.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));

    let graph = starterGraph();
    if (state.version !== null) {
      const res = await api("GET", `${CFG.urls.version}${state.version}`);
      if (!res.ok) {
        $("#panel").textContent = "Could not load the version: " + res.data.message;
        return;
      }
      graph = res.data.graph;
    }
    state.settings = clone(graph.settings) || {};
    cy = G.create($("#cy"), graph, state.types, {
      layout: "LR",
      cytoscape: { boxSelectionEnabled: true, selectionType: "single", autoungrabify: state.readOnly },
    });
    if (!state.readOnly) {
      eh = cy.edgehandles({
        canConnect: (source, target) => !source.same(target) && isReal(target),
        edgeParams: (source, target) => ({ data: G.edgeData({ source: source.id(), target: target.id() }, newEdgeId()) }),
        hoverDelay: 150, snap: true, snapThreshold: 30, snapFrequency: 15, noEdgeEventsInDraw: true,
        disableBrowserGestures: true,
      });
      cy.on("ehcomplete", (event, source, target, added) => {
        cy.$(":selected").unselect();
        added.select();
        commit();
        renderPanel();
      });
      setupHandle();
      cy.on("dragfree", "node", () => commit());
    }
    cy.on("select unselect", debounce(renderPanel, 0));
    state.undo = [snapshot()];
    state.undoIndex = 0;
    state.saved = state.undo[0];
    bindToolbar();
    buildPalette();
    showBanner();
    document.body.classList.toggle("editor-readonly", state.readOnly);
    renderPanel();
    if (location.hash.startsWith("#restored-")) {
      toast(`Restored as v${location.hash.slice("#restored-".length)}`, "ok");
      history.replaceState(null, "", location.pathname + location.search);
    }
    document.getElementById("editor").dataset.ready = "true";
  }

  // Read-only hooks for tests and the browser console; editing goes through the UI.
  window.SteadyflowEditor = {
    cy: () => cy,
    graph: () => toGraph(),
    isDirty: () => isDirty(),
    state: () => ({ version: state.version, latest: state.latest, readOnly: state.readOnly,
      undo: state.undoIndex, issues: state.issues.map((i) => i.message) }),
  };

  init();
})();
