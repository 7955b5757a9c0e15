// The real tables the server serves (workflows/engine/event_kinds.py), read by running Python: the
// reducer is tested against what the page gets, not a copy. The project's .venv when present.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function serverTables() {
  const venv = path.join(ROOT, ".venv/bin/python");
  const python = existsSync(venv) ? venv : "python3";
  const out = execFileSync(python, ["-m", "workflows.engine.event_kinds"], { cwd: ROOT, encoding: "utf8" });
  return JSON.parse(out);
}
