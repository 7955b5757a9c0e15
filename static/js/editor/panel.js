/* The side panel: the selected node (its fields and its config form from the type's schema), edge
 * (its `when`, parse-checked by the server as typed), a multi-selection, or the graph's settings;
 * with the field errors of the schemas and of the last server validation. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { debounce } from "../lib/format.js";
import { CFG, state, view } from "./context.js";
import { ID_PATTERN, getPath } from "./model.js";
import { addEdge, deleteSelection, isReal, realEdges, realNodes, renameNode, selection, setEdgeLabel,
  setEdgeWhen, setNodeField, commit } from "./canvas.js";
import { field, schemaErrors, schemaFields, section, showFieldError } from "./forms.js";
import { attachFunctionPicker } from "./functions.js";
import { attachMcpPicker } from "./mcp-picker.js";
import { inputSection } from "./input-panel.js";
import { testSection } from "./node-test.js";
import { updateToolbar } from "./toolbar.js";
import { revalidateSoon } from "./validation.js";

const panel = () => document.getElementById("panel");

/** After an edit (graph:changed): the toolbar's state, the server's problems again if they are
 * shown, and the field errors (undo/redo redraws the whole panel instead). */
export function afterChange(fromHistory) {
  updateToolbar();
  if (state.issuesShown) revalidateSoon();
  if (!fromHistory) refreshPanelIssues();
}

export function renderPanel() {
  const box = replaceChildren(panel());
  state.parseErrors.clear();
  const selected = selection();
  if (selected.length === 1 && selected.isNode()) box.append(nodePanel(selected[0]));
  else if (selected.length === 1 && selected.isEdge()) box.append(edgePanel(selected[0]));
  else if (selected.length > 1) box.append(multiPanel(selected));
  else box.append(graphPanel());
  refreshPanelIssues();
  updateToolbar();
}

const deleteButton = (text) => (state.readOnly ? null : el("div", { class: "panel-actions" },
  el("button", { type: "button", class: "danger", id: "panel-delete", onclick: deleteSelection }, text)));

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
        showFieldError("id", v === id || ID_PATTERN.test(v) ? (v !== id && !view.cy.getElementById(v).empty()
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
    // Only the settings that apply to this kind (the node types say: retries, the circuit fallback).
    const retries = type.retries !== false || data.retry ? [
      field({ path: "retry.max_attempts", label: "Retry: max attempts", kind: "integer", min: 1, max: 100,
        value: getPath(data, "retry.max_attempts"), apply: apply("retry.max_attempts") }),
      field({ path: "retry.backoff_s", label: "Retry: backoff (s)", kind: "number", min: 0,
        value: getPath(data, "retry.backoff_s"), apply: apply("retry.backoff_s") }),
      field({ path: "retry.max_backoff_s", label: "Retry: max backoff (s)", kind: "number", min: 0,
        value: getPath(data, "retry.max_backoff_s"), apply: apply("retry.max_backoff_s") }),
      field({ path: "retry.jitter", label: "Retry: jitter", kind: "bool", value: getPath(data, "retry.jitter"),
        apply: apply("retry.jitter") })] : [];
    sections.push(section("Execution",
      field({ path: "queue", label: "Queue", kind: "select", options: CFG.queues, value: data.queue,
        placeholder: `— (the type's default: ${type.default_queue || "default"})`, apply: apply("queue") }),
      field({ path: "priority", label: "Priority", kind: "select", options: ["high", "normal", "low"],
        value: data.priority, placeholder: "— (the instance's)", apply: apply("priority") }),
      field({ path: "timeout_s", label: "Timeout (s)", kind: "number", value: data.timeout_s, apply: apply("timeout_s"),
        placeholder: "server default" }),
      ...retries));
    if (type.circuit_fallback || data.fallback) {
      sections.push(section("Fallback",
        field({ path: "fallback.mode", label: "When the provider's circuit is open", kind: "select",
          options: ["rule", "review"], value: getPath(data, "fallback.mode"), apply: apply("fallback.mode"),
          placeholder: "— (halt into review)" }),
        field({ path: "fallback.route", label: "Rule: route", kind: "text", value: getPath(data, "fallback.route"),
          apply: apply("fallback.route") }),
        field({ path: "fallback.output", label: "Rule: output (JSON)", kind: "json", value: getPath(data, "fallback.output"),
          apply: apply("fallback.output") })));
    }
    sections.push(section("Compensation",
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
  const trial = testSection(id, node.data("type"), data);
  if (trial) sections.push(trial);
  // The python functions a node may call, with their docstrings, instead of typing a name from memory.
  const pickFor = (path, kind) => sections.forEach((s) => s.querySelectorAll(`.field[data-path="${path}"]`)
    .forEach((row) => attachFunctionPicker(row, kind)));
  if (type.schema && type.schema.properties && type.schema.properties.function) pickFor("config.function", "name");
  pickFor("compensate", "json");
  if (node.data("type") === "llm" && CFG.canSave) {
    sections.forEach((s) => s.querySelectorAll('.field[data-path="config.tools"]').forEach(attachMcpPicker));
  }
  return el("div", { class: "node-panel", "data-node": id }, header,
    el("div", { id: "panel-issues-slot" }), ...sections, deleteButton("Delete node"));
}

function connectionsSection(node) {
  const out = node.outgoers("edge").filter(isReal);
  const list = el("ul", { class: "connections" }, out.map((e) => el("li", {},
    el("button", { type: "button", class: "link-button", onclick: () => { view.cy.$(":selected").unselect(); e.select(); } },
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
  let data = null;
  let failure = null;
  try {
    // With the source node, the server also checks the route literals against the routes it declares.
    const source = view.cy.getElementById(edgeId).source();
    const body = { expression: text };
    if (source && !source.empty()) {
      const node = source.data("node") || {};
      body.source = { id: source.id(), type: source.data("type"), config: node.config || {}, fallback: node.fallback };
    }
    data = await request("POST", CFG.urls.checkExpression, body);
  } catch (err) {
    failure = err.message;
  }
  const edge = view.cy.getElementById(edgeId);
  if (edge.empty() || edge.data("when") !== text) return; // the text changed meanwhile
  const status = document.getElementById("when-status");
  if (!status) return;
  if (failure !== null) {
    status.textContent = failure;
    status.className = "when-status bad";
    return;
  }
  status.textContent = data.valid ? (data.empty ? "no condition: always fires" : "✓ condition parses") : data.message;
  status.className = "when-status " + (data.valid ? "good" : "bad");
  const fieldRow = status.closest(".field");
  if (fieldRow) fieldRow.classList.toggle("invalid", !data.valid);
}, 150);

function edgePanel(edge) {
  const header = el("div", { class: "panel-head" },
    el("span", { class: "type-chip edge-chip" }, "→"),
    el("div", {}, el("h2", {}, `${edge.data("source")} → ${edge.data("target")}`),
      el("div", { class: "muted" }, "Edge")));
  const whenInput = el("input", { id: "f-when", name: "when", class: "code", autocomplete: "off",
    placeholder: "e.g. route == 'search' (empty: always fires)", disabled: state.readOnly });
  whenInput.value = edge.data("when") || "";
  const whenStatus = el("div", { class: "when-status", id: "when-status", "aria-live": "polite" });
  whenInput.addEventListener("input", () => {
    setEdgeWhen(edge, whenInput.value.trim());
    whenStatus.textContent = "checking…";
    whenStatus.className = "when-status";
    checkExpression(edge.id(), whenInput.value.trim());
  });
  whenInput.addEventListener("change", commit);
  const whenField = el("div", { class: "field", "data-path": "when" },
    el("label", { for: "f-when" }, "Condition (when)"), whenInput, whenStatus,
    el("div", { class: "help" }, "Names: the source's output fields (route, …), output, context, steps, input."));
  checkExpression(edge.id(), edge.data("when") || "");
  const labelField = field({ path: "edge.label", label: "Label", kind: "text", value: (edge.data("edge") || {}).label,
    apply: (v) => setEdgeLabel(edge, v), placeholder: "shown instead of the condition" });
  return el("div", { class: "edge-panel", "data-edge": edge.id() }, header, el("div", { id: "panel-issues-slot" }),
    section("Edge", whenField, labelField), deleteButton("Delete edge"));
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
    // Every node as a button: the keyboard's way to a node without the canvas (N on the canvas too).
    section("Nodes", el("div", { class: "node-buttons", id: "node-buttons" }, realNodes().map((n) =>
      el("button", { type: "button", class: "link-button", "data-node": n.id(),
        onclick: () => {
          view.cy.$(":selected").unselect();
          n.select();
          // After the panel redraws for the node (select -> renderPanel, a timer too): keep the focus on it.
          setTimeout(() => { const idField = document.getElementById("f-id"); if (idField) idField.focus(); }, 0);
        } }, n.id())))),
    section("Definition",
      field({ path: "meta.name", label: "Name", kind: "text", required: true, value: state.name,
        apply: (v) => { state.name = v || ""; updateToolbar(); } }),
      field({ path: "meta.description", label: "Description", kind: "textarea", rows: 3, value: state.description,
        apply: (v) => { state.description = v || ""; } })),
    inputSection(renderPanel),
    section("Limits",
      field({ path: "settings.max_transitions", label: "Max transitions (loop breaker)", kind: "integer", min: 1,
        value: s.max_transitions, apply: applySetting("max_transitions"), placeholder: "default: one pass over every node" }),
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
export function refreshPanelIssues() {
  const box = panel();
  const errors = {};
  let serverIssues = [];
  const nodeDiv = box.querySelector(".node-panel");
  const edgeDiv = box.querySelector(".edge-panel");
  if (nodeDiv) {
    const node = view.cy.getElementById(nodeDiv.dataset.node);
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
    if (state.extras.input !== undefined) {
      Object.assign(errors, schemaErrors("input", CFG.shapes.input, state.extras.input, "input"));
    }
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
    // No field of that name (e.g. an unknown key): show it on its section.
    if (showFieldError(path, message)) return;
    if (path.startsWith("config")) showFieldError("config", `${path}: ${message}`);
    else if (path.startsWith("input")) showFieldError("input", `${path}: ${message}`);
  });
  const slot = box.querySelector("#panel-issues-slot");
  if (slot) {
    replaceChildren(slot);
    if (serverIssues.length) {
      slot.append(el("ul", { class: "panel-issues", id: "panel-issues" }, serverIssues.map((i) => el("li", {}, i.message))));
    }
  }
}
