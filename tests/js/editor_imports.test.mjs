// The front end's import graph is one-way (issue 20): no module of static/js imports itself back
// through others, and lib/ (the shared helpers) imports only lib/. The editor's modules talk upward
// through its event bus (lib/bus.js), never by importing the module that uses them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const JS = resolve(dirname(fileURLToPath(import.meta.url)), "../../static/js");

function jsFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return jsFiles(path);
    return name.endsWith(".js") ? [path] : [];
  });
}

/** The specifiers a module imports: static imports and re-exports (one line or many), bare
 * side-effect imports, and dynamic import("...") with a literal. Comments are dropped first. */
export function importsOf(source) {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found = [];
  const patterns = [
    /(?:^|[;\s])(?:import|export)\s[^;"'`]*?\sfrom\s*["']([^"']+)["']/g,
    /(?:^|[;\s])import\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  patterns.forEach((re) => { for (const m of code.matchAll(re)) found.push(m[1]); });
  return found;
}

/** {module path relative to static/js: [relative paths it imports]} for every .js under `root`. */
export function importGraph(root) {
  const graph = {};
  jsFiles(root).forEach((file) => {
    const name = relative(root, file);
    graph[name] = importsOf(readFileSync(file, "utf8"))
      .filter((spec) => spec.startsWith("."))
      .map((spec) => relative(root, resolve(dirname(file), spec)));
  });
  return graph;
}

/** The import cycles of a graph, each as the path a -> b -> ... -> a (one per back edge a depth-first walk meets). */
export function cycles(graph) {
  const out = [];
  const state = {}; // undefined: not seen, 1: on the current path, 2: done
  const path = [];
  const visit = (name) => {
    state[name] = 1;
    path.push(name);
    for (const next of graph[name] || []) {
      if (state[next] === 1) out.push([...path.slice(path.indexOf(next)), next]);
      else if (state[next] === undefined) visit(next);
    }
    path.pop();
    state[name] = 2;
  };
  Object.keys(graph).sort().forEach((name) => { if (state[name] === undefined) visit(name); });
  return out;
}

test("the import scanner reads every form of import and skips comments", () => {
  const source = [
    "/* import { no } from './comment.js'; */",
    "// import { nor } from './line-comment.js';",
    'import * as G from "../lib/graph.js";',
    "import {",
    "  a,",
    "  b } from './multi.js';",
    'import "./side-effect.js";',
    'export { c } from "./re-export.js";',
    'const later = () => import("./lazy.js");',
    'const text = "imports from nowhere";',
  ].join("\n");
  assert.deepEqual(importsOf(source).sort(),
    ["../lib/graph.js", "./lazy.js", "./multi.js", "./re-export.js", "./side-effect.js"]);
});

test("the cycle finder reports a cycle and passes a chain", () => {
  assert.deepEqual(cycles({ a: ["b"], b: ["c"], c: ["a"] }), [["a", "b", "c", "a"]]);
  assert.deepEqual(cycles({ a: ["b", "c"], b: ["c"], c: [] }), []);
  assert.deepEqual(cycles({ a: ["a"] }), [["a", "a"]]);
});

test("no module under static/js imports itself back (the editor is a one-way chain)", () => {
  const graph = importGraph(JS);
  assert.ok(Object.keys(graph).some((n) => n.startsWith("editor/")), "the scan found no editor module");
  const found = cycles(graph).map((c) => c.join(" -> "));
  assert.deepEqual(found, [], `import cycles:\n  ${found.join("\n  ")}`);
});

test("every relative import names a module that exists", () => {
  const graph = importGraph(JS);
  const missing = Object.entries(graph).flatMap(([name, deps]) => deps.filter((d) => !(d in graph))
    .map((d) => `${name} imports ${d}`));
  assert.deepEqual(missing, []);
});

test("lib/ imports only lib/ (the editor, live view and review pages build on it, never the reverse)", () => {
  const graph = importGraph(JS);
  const wrong = Object.entries(graph).filter(([name]) => name.startsWith("lib/"))
    .flatMap(([name, deps]) => deps.filter((d) => !d.startsWith("lib/")).map((d) => `${name} imports ${d}`));
  assert.deepEqual(wrong, []);
});

test("editor/main.js is the top: no module imports it", () => {
  const graph = importGraph(JS);
  const importers = Object.entries(graph).filter(([, deps]) => deps.includes("editor/main.js")).map(([n]) => n);
  assert.deepEqual(importers, []);
});
