/* The editor's state, pure (tests/js/editor-state.test.mjs): what the editor shows, made from the
 * page's config, and the events its modules emit upward (lib/bus.js). context.js holds the one
 * instance of each for the page. */

/** What a lower module tells the modules above it (main.js wires the listeners):
 * - graph:changed {fromHistory}: an edit was recorded, or undo/redo put a snapshot back;
 * - panel:render: the side panel shows something that is gone or changed (redraw it);
 * - panel:issues: a field was applied or the server's problems changed (refresh the panel's errors);
 * - version:restore {number, button}: the read-only banner's "Restore" was clicked. */
export const EVENTS = ["graph:changed", "panel:render", "panel:issues", "version:restore"];

/** A fresh state from the `editor-config` block (CFG). */
export function createState(cfg) {
  return {
    types: {},            // node type name -> {name, label, icon, color, schema, default_queue, structural}
    typeOrder: [],
    readOnly: Boolean(cfg.readOnly),
    version: cfg.version, // the version shown (and the base a save starts from)
    latest: cfg.latest,
    name: cfg.name,
    description: cfg.description || "",
    settings: {},
    extras: {},           // the graph's other top-level keys (e.g. `input`), kept as they are
    history: null,        // model.js History of snapshot strings
    issues: [],           // last server validation: [{message, node?, edge?, field?, ids: [element ids]}]
    issuesShown: false,
    parseErrors: new Set(), // panel fields whose text does not parse (JSON, numbers): not applied
    edgeSeq: 0,
    connectMode: false,
  };
}

/** Unsaved changes: an editable canvas whose history is away from the last saved snapshot. */
export const dirty = (state) => !state.readOnly && state.history !== null && state.history.dirty;
