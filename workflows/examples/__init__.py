"""The example workflows shipped with Steadyflow, and the Python functions they call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GRAPHS_DIR = Path(__file__).parent / "graphs"


def example_files() -> list[Path]:
    return sorted(GRAPHS_DIR.glob("*.json"))


def load_example(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
