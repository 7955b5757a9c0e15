/* The editor's one state, for the page: the `editor-config` block (CFG), what the editor shows
 * (state.js), the cytoscape instance once main.js has made it, and the event bus the modules emit
 * upward through (lib/bus.js; main.js wires the listeners). Nothing is a global. */

import { jsonScript } from "../lib/dom.js";
import { createBus } from "../lib/bus.js";
import { EVENTS, createState, dirty } from "./state.js";

export const CFG = jsonScript("editor-config");

export const state = createState(CFG);

/** The canvas: set once by main.js. */
export const view = { cy: null, eh: null };

export const events = createBus(EVENTS);

export const isDirty = () => dirty(state);
