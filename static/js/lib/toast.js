/* The short message in the page's `#toast` box ("Saved v3", "2 problems found"): `kind` is "ok",
 * "error" or "info" (the default); an error stays longer. One box: a new message replaces the last. */

let timer = null;

export function toast(message, kind) {
  const box = document.getElementById("toast");
  if (!box) return;
  box.textContent = message;
  box.className = "toast " + (kind || "info");
  box.hidden = false;
  clearTimeout(timer);
  timer = setTimeout(() => { box.hidden = true; }, kind === "error" ? 7000 : 3500);
}
