"""Python functions that `python` nodes may call, registered in code by name.

Nothing typed in the browser is ever executed: a node names a function, and only functions
registered here (by the project or a deployment's own module) can run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FunctionCall:
    args: dict[str, Any]
    context: dict[str, Any]
    steps: Mapping[str, Any]
    start_input: dict[str, Any]
    idempotency_key: str
    instance_id: int
    node_id: str
    visit: int
    attempt: int


@dataclass
class FunctionResult:
    """Return this to update the instance context as well as produce an output."""

    output: Any = None
    context: dict[str, Any] = field(default_factory=dict)


Function = Callable[[FunctionCall], Any]
_FUNCTIONS: dict[str, Function] = {}


def register_function(name: str) -> Callable[[Function], Function]:
    def decorator(fn: Function) -> Function:
        _FUNCTIONS[name] = fn
        return fn

    return decorator


def get_function(name: str) -> Function | None:
    return _FUNCTIONS.get(name)


def function_names() -> list[str]:
    return sorted(_FUNCTIONS)


def describe_functions() -> list[dict[str, str]]:
    """Every registered function, by name, with the first paragraph of its docstring (the editor's
    picker shows it)."""
    out = []
    for name in sorted(_FUNCTIONS):
        doc = inspect.getdoc(_FUNCTIONS[name]) or ""
        out.append({"name": name, "doc": " ".join(doc.split("\n\n")[0].split())})
    return out
