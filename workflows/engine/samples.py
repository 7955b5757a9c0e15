"""A node's pinned sample: test data the editor's Test panel runs the node with (workflows/authoring/node_trial.py).

Stored in the graph under the node (`"sample": {"context": {...}, "input": {...}, "steps": {...},
"pinned_response": {...}}`), validated and bounded here, and ignored when an instance runs.
"""

from __future__ import annotations

import json
from typing import Any

SAMPLE_KEYS = ("context", "input", "steps", "pinned_response")
MAX_SAMPLE_BYTES = 64_000  # a sample as JSON


def sample_issues(value: Any) -> list[str]:
    """What is wrong with a sample (empty: nothing): an object of `context`, `input` and `steps`
    objects and optionally an llm node's `pinned_response`, at most MAX_SAMPLE_BYTES as JSON."""
    if not isinstance(value, dict):
        return ["the sample must be a JSON object"]
    problems = [f"unknown sample key '{key}' (use {', '.join(SAMPLE_KEYS)})" for key in value
                if key not in SAMPLE_KEYS]
    problems += [f"sample '{key}' must be a JSON object" for key in SAMPLE_KEYS
                 if key in value and not isinstance(value[key], dict)]
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError):
        return [*problems, "the sample must be plain JSON"]
    if size > MAX_SAMPLE_BYTES:
        problems.append(f"the sample is {size} bytes as JSON, {MAX_SAMPLE_BYTES} at most")
    return problems
