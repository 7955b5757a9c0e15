"""The example workflows shipped with Steadyflow, and the Python functions they call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GRAPHS_DIR = Path(__file__).parent / "graphs"
# Evaluation datasets of the examples: `<workflow slug>.<dataset name>.jsonl` (load_examples).
DATASETS_DIR = Path(__file__).parent / "datasets"
# The origin the examples' declared input defaults point at (the demo endpoints of `make run`'s server,
# dashboard/api/demo.py). load_examples swaps in STEADYFLOW_DEMO_BASE_URL, which `make run` sets to the
# port it actually took.
DEMO_ORIGIN = "http://127.0.0.1:8000"
# The MCP server credential the order-desk example names (load_examples creates it).
DEMO_MCP_CREDENTIAL = "demo-mcp"


def example_files() -> list[Path]:
    return sorted(GRAPHS_DIR.glob("*.json"))


def load_example(path: Path, demo_base: str | None = None) -> dict[str, Any]:
    """An example's document; with `demo_base`, its input defaults and examples point there instead
    of DEMO_ORIGIN."""
    document: dict[str, Any] = json.loads(path.read_text())
    base = (demo_base or DEMO_ORIGIN).rstrip("/")
    for field in ((document.get("input") or {}).get("properties") or {}).values():
        if isinstance(field.get("default"), str) and field["default"].startswith(DEMO_ORIGIN + "/"):
            field["default"] = base + field["default"][len(DEMO_ORIGIN):]
    return document
