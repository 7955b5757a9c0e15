"""A step's token count from its recorded usage: the one rule every view and the instance's total use.

An llm step records `prompt_tokens` and `completion_tokens`; a sub-workflow or planner step records
`tokens`, its child instance's total (plus, for the planner, its planning call), and no split. The step
inspector, the run report and the instance's running total all count a step with this function, so
they agree (issue 22: the inspector said 1112 for a planner step, the report 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def step_tokens(usage: Mapping[str, Any] | None) -> int:
    if not usage:
        return 0
    if "tokens" in usage:
        return int(usage.get("tokens") or 0)
    return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)


def has_split(usage: Mapping[str, Any] | None) -> bool:
    """Whether the usage says how many tokens went in and came out (an llm step), or only a total."""
    if not usage or "tokens" in usage:
        return False
    return "prompt_tokens" in usage or "completion_tokens" in usage
