"""The engine is plain Python: importing any module of workflows/engine/ loads no Django, Channels, RQ,
Redis or database driver (docs/DESIGN.md: the engine is testable without them)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import workflows.engine

FORBIDDEN = ("django", "channels", "daphne", "rq", "django_rq", "redis", "psycopg", "sqlite3")

# Runs in a fresh interpreter (this test process has Django loaded already). Imports the modules one by
# one and reports, for each, which forbidden top-level packages it brought in.
PROBE = """
import importlib, json, sys
forbidden, names = json.loads(sys.argv[1])
loaded = {}
for name in names:
    importlib.import_module(name)
    loaded[name] = sorted(p for p in forbidden if p in sys.modules)
print(json.dumps(loaded))
"""


def engine_modules() -> list[str]:
    package = workflows.engine
    names = [package.__name__]
    names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(names)


def test_the_module_list_covers_every_file_under_workflows_engine() -> None:
    root = Path(workflows.engine.__file__).parent
    files = {p.relative_to(root.parent.parent).with_suffix("") for p in root.rglob("*.py")}
    expected = {".".join(p.parts[:-1] if p.name == "__init__" else p.parts) for p in files}
    assert set(engine_modules()) == expected


def test_no_engine_module_imports_a_framework_or_database() -> None:
    names = engine_modules()
    env_root = Path(workflows.engine.__file__).parents[2]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([FORBIDDEN, names])],
        cwd=env_root, capture_output=True, text=True, check=False,
        # no DJANGO_SETTINGS_MODULE: nothing here may need it
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(env_root)},
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert set(loaded) == set(names)
    offenders = {name: packages for name, packages in loaded.items() if packages}
    assert offenders == {}, f"engine modules that import a framework or database: {offenders}"
