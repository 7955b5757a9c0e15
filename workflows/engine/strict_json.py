"""Parse JSON from outside (request bodies, form fields) so that nothing later can fail on it.

Python's json module accepts what the rest of the stack cannot: NaN and Infinity (PostgreSQL's jsonb
refuses them), 1e400 (read as infinity), integers of thousands of digits, "\\ud800" (a lone surrogate
that cannot be encoded to UTF-8 for the database), "\\u0000" (jsonb and text columns refuse NUL), and
nesting deep enough to raise RecursionError. `loads` refuses each of those with a JSONRejected that
names the problem; callers answer it with a 4xx.
"""

from __future__ import annotations

import json
import math
from typing import Any

from workflows.engine import limits

MAX_INT = 2**63 - 1  # what a 64-bit database column holds; JSON from clients needs no bigger integer


class JSONRejected(ValueError):
    """Input that is not acceptable JSON; str() says why."""


def _constant(name: str) -> Any:
    raise JSONRejected(f"{name} is not a JSON number (use a finite number or null)")


def _integer(text: str) -> int:
    # Checked on the digits before int(): a 100,000-digit integer costs seconds to convert.
    if len(text.lstrip("-")) > 19 or abs(int(text)) > MAX_INT:
        raise JSONRejected(f"integer {text[:24]}{'…' if len(text) > 24 else ''} is out of range "
                           f"(at most {MAX_INT} in magnitude)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONRejected(f"number {text[:24]} is too large")
    return value


def loads(raw: str | bytes, what: str = "the request body", max_depth: int = limits.MAX_JSON_DEPTH) -> Any:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRejected(f"{what} is not valid JSON: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(raw, parse_constant=_constant, parse_int=_integer, parse_float=_float)
    except JSONRejected as exc:
        raise JSONRejected(f"{what} is not acceptable JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise JSONRejected(f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise JSONRejected(f"{what} is nested too deeply ({max_depth} levels at most)") from None
    problem = check(value, max_depth)
    if problem:
        raise JSONRejected(f"{what} {problem}")
    return value


def check(value: Any, max_depth: int = limits.MAX_JSON_DEPTH) -> str | None:
    """Why an already-parsed value cannot be stored, or None. Iterative: no recursion to exhaust."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return f"has a string {problem} at {_where(path)}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"holds a number that is not finite at {_where(path)}"
        elif isinstance(item, (dict, list)):
            if depth > max_depth:
                return f"is nested too deeply ({max_depth} levels at most) at {_where(path)}"
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = _text_problem(str(key))
                    if problem:
                        return f"has a key {problem} at {_where(path)}"
                    stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
            else:
                stack.extend((child, f"{path}.{i}" if path else str(i), depth + 1) for i, child in enumerate(item))
    return None


def _where(path: str) -> str:
    if not path:
        return "the top"
    return path if len(path) <= 60 else "…" + path[-60:]


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "with a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"with a lone surrogate ({text[exc.start]!a}), which is not valid Unicode"
    return None
