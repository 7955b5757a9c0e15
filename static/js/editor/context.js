/* The editor's state, in one place: the page's config (the `editor-config` block), what the editor
 * shows, and the cytoscape instance once main.js has made it. The other editor modules import this;
 * nothing is a global. */

import { jsonScript } from "../lib/dom.js";

export const CFG = jsonScript("editor-config");

export const state = {
  types: {},            // node type name -> {name, label, icon, color, schema, default_queue, structural}
  typeOrder: [],
  readOnly: CFG.readOnly,
  version: CFG.version, // the version shown (and the base a save starts from)
  latest: CFG.latest,
  name: CFG.name,
  description: CFG.description || "",
  settings: {},
  extras: {},           // the graph's other top-level keys (e.g. `input`), kept as they are
  history: null,        // model.js History of snapshot strings
  issues: [],           // last server validation: [{message, node?, edge?, field?, ids: [element ids]}]
  issuesShown: false,
  parseErrors: new Set(), // panel fields whose text does not parse (JSON, numbers): not applied
  edgeSeq: 0,
  connectMode: false,
};

/** The canvas: set once by main.js. */
export const view = { cy: null, eh: null };

export const isDirty = () => !state.readOnly && state.history !== null && state.history.dirty;
