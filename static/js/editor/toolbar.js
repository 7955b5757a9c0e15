/* The toolbar's state and the read-only banner: which buttons are enabled, the dirty flag, the
 * version badge. The buttons' wiring and the keys are in bindings.js (above every module they call). */

import { el, replaceChildren } from "../lib/dom.js";
import { CFG, events, state, isDirty } from "./context.js";
import { selection } from "./canvas.js";

const $ = (sel) => document.querySelector(sel);

export function updateToolbar() {
  const dirty = isDirty();
  const h = state.history;
  // The flag keeps its place when off (visibility, not display): the toolbar never reflows under the pointer.
  const flag = $("#dirty-flag");
  flag.classList.toggle("off", !dirty);
  flag.setAttribute("aria-hidden", dirty ? "false" : "true");
  $("#readonly-flag").hidden = !state.readOnly;
  $("#btn-undo").disabled = state.readOnly || !h.canUndo;
  $("#btn-redo").disabled = state.readOnly || !h.canRedo;
  $("#btn-delete").disabled = state.readOnly || selection().empty();
  $("#btn-save").disabled = state.readOnly || !(dirty || state.latest === null);
  $("#btn-run").disabled = !CFG.canRun || state.latest === null;
  $("#btn-run").title = state.latest === null ? "Save a first version to run it"
    : (CFG.canRun ? `Start an instance of v${state.latest}` : "Running needs the designers or operators group");
  $("#version-badge").textContent = state.version ? "v" + state.version : "new";
  $("#wf-title").textContent = state.name;
  document.title = `${dirty ? "• " : ""}${state.name} · Editor · Steadyflow`;
}

export function showBanner() {
  const banner = replaceChildren($("#banner"));
  if (CFG.archived) {
    banner.append("This workflow is archived: it is read-only and starts no new instances. ",
      el("a", { href: CFG.urls.list + "?archived=1" }, "Unarchive it from the list."));
  } else if (state.version !== null && state.latest !== null && state.version !== state.latest) {
    banner.append(`You are looking at v${state.version} (read-only); the latest is v${state.latest}. `,
      el("a", { href: CFG.urls.editor, id: "open-latest" }, "Open the latest"));
    if (CFG.canSave) {
      banner.append(" or ", el("button", { type: "button", id: "banner-restore", class: "inline-button",
        onclick: (e) => events.emit("version:restore", { number: state.version, button: e.currentTarget }) }, `Restore v${state.version} as a new version`));
    }
  } else if (!CFG.canSave) {
    banner.append("Read-only: changing workflows needs the designers group.");
  } else {
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
}
