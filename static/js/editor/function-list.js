/* The registered python functions (GET /api/functions: [{name, doc}]) as the function picker shows
 * them, pure (tests/js/function-list.test.mjs): filtered by what is typed, and the function a field's
 * value names (a python node's `function`, or a `compensate` given as a name or as a python action). */

/** The functions whose name or docstring contains every word of `query` (case-insensitive): names
 * that start with the query first, then the other name matches, then docstring-only matches. */
export function filterFunctions(functions, query) {
  const words = String(query || "").toLowerCase().split(/\s+/).filter(Boolean);
  const rank = (f) => {
    const name = f.name.toLowerCase();
    const text = name + " " + (f.doc || "").toLowerCase();
    if (!words.every((w) => text.includes(w))) return -1;
    if (!words.length || name.startsWith(words[0])) return 0;
    return words.every((w) => name.includes(w)) ? 1 : 2;
  };
  return functions.map((f) => [rank(f), f]).filter(([r]) => r >= 0)
    .sort((a, b) => a[0] - b[0] || a[1].name.localeCompare(b[1].name)).map(([, f]) => f);
}

/** The function a field's value names: a string, or `{"type": "python", "config": {"function": …}}`. */
export function functionNamed(value) {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && value.type === "python" && value.config
      && typeof value.config.function === "string") return value.config.function;
  return null;
}

/** The docstring's first line, for a one-line summary under a name. */
export function summary(doc) {
  const line = String(doc || "").trim().split("\n")[0].trim();
  return line || "(no docstring)";
}
