"""Conditions and templates, evaluated by simpleeval (never Python's eval).

Names visible to an expression: the source step's output fields at top level (so `route == 'x'`
and `approved` read naturally), plus `output`, `context`, `steps` and `input`. Dict keys read as
attributes (`context.question`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import simpleeval

from workflows.engine.errors import ExpressionError


class MissingValue(ExpressionError):
    """The expression names a value the context does not hold (yet)."""


_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_FUNCTIONS = {
    "len": len,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "lower": lambda s: str(s).lower(),
    "upper": lambda s: str(s).upper(),
    "contains": lambda haystack, needle: needle in haystack,
}


# Conditions and templates are short; these bounds keep a hostile one from costing the parser or the
# evaluator's recursion anything (README, "Graph format").
MAX_EXPRESSION_CHARS = 2000
MAX_EXPRESSION_DEPTH = 50


def _short(expression: str) -> str:
    return repr(expression if len(expression) <= 80 else expression[:77] + "...")


def _depth(tree: ast.AST) -> int:
    """The syntax tree's depth, without recursion."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


@lru_cache(maxsize=4096)
def parse(expression: str) -> ast.Expr:
    """Parse once and cache; raises ExpressionError with the parser's reason."""
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError("expression is empty")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"is too long ({len(expression)} characters, {MAX_EXPRESSION_CHARS} at most)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"does not parse: {exc.msg} in {expression!r}") from None
    except (RecursionError, MemoryError):
        # "1+1+...", "not not ...", "----1" thousands deep exhaust the parser before any syntax error.
        raise ExpressionError(f"is nested too deeply to parse in {_short(expression)}") from None
    except ValueError as exc:  # a NUL character (Python 3.11 raises ValueError, later versions SyntaxError)
        raise ExpressionError(f"does not parse: {exc} in {_short(expression)}") from None
    if _depth(tree) > MAX_EXPRESSION_DEPTH:
        # The evaluator (simpleeval) recurses once per level; refuse at save, not at run time.
        raise ExpressionError(f"is nested too deeply ({MAX_EXPRESSION_DEPTH} levels at most) in "
                              f"{_short(expression)}")
    # simpleeval refuses dunder access at evaluation; refuse it at save time too.
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExpressionError(f"access to {node.attr!r} is not allowed in {expression!r}")
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise ExpressionError(f"name {node.id!r} is not allowed in {expression!r}")
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            raise ExpressionError(f"{type(node).__name__.lower()} is not allowed in {expression!r}")
    return tree.body  # type: ignore[return-value]


def evaluate(expression: str, names: Mapping[str, Any]) -> Any:
    parsed = parse(expression)
    evaluator = simpleeval.EvalWithCompoundTypes(names=dict(names), functions=_FUNCTIONS)
    try:
        return evaluator.eval(expression.strip(), previously_parsed=parsed)
    except simpleeval.NameNotDefined as exc:
        raise MissingValue(f"{exc.name!r} is not defined in {expression!r}") from None
    except simpleeval.AttributeDoesNotExist as exc:
        raise MissingValue(f"{exc.attr!r} does not exist in {expression!r}") from None
    except KeyError as exc:
        raise MissingValue(f"{exc.args[0]!r} does not exist in {expression!r}") from None
    except simpleeval.InvalidExpression as exc:
        raise ExpressionError(f"{exc} ") from None
    except Exception as exc:  # noqa: BLE001 - any evaluation error is the expression's fault
        raise ExpressionError(f"{type(exc).__name__}: {exc} in {expression!r}") from None


def condition_names(output: Any, context: Mapping[str, Any], steps: Mapping[str, Any],
                    start_input: Mapping[str, Any]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    if isinstance(output, Mapping):
        names.update(output)
    names.update({"output": output, "context": context, "steps": steps, "input": start_input})
    return names


def template_expressions(text: str) -> list[str]:
    return _TEMPLATE.findall(text)


def render(value: Any, names: Mapping[str, Any]) -> Any:
    """Render `{{ expr }}` placeholders in strings, recursively through lists and dicts.

    A string that is exactly one placeholder keeps the value's type (an amount stays a number).
    """
    if isinstance(value, str):
        match = _TEMPLATE.fullmatch(value.strip())
        # "{{ a }} and {{ b }}" also fullmatches (the group swallows "a }} and {{ b"): one placeholder only.
        if match and len(_TEMPLATE.findall(value)) == 1:
            return _lenient(match.group(1), names)
        return _TEMPLATE.sub(lambda m: _to_text(_lenient(m.group(1), names)), value)
    if isinstance(value, list):
        return [render(item, names) for item in value]
    if isinstance(value, dict):
        return {key: render(item, names) for key, item in value.items()}
    return value


def _lenient(expression: str, names: Mapping[str, Any]) -> Any:
    # A template naming a value not set yet renders empty (like `{{ context.observations }}` before
    # the first observation); conditions stay strict, since a typo there silently misroutes.
    try:
        return evaluate(expression, names)
    except MissingValue:
        return None


def _to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, sort_keys=True)
    return str(value)


def check_templates(value: Any) -> list[str]:
    """Return the parse error of each template placeholder found in value (for validation)."""
    errors: list[str] = []
    if isinstance(value, str):
        for expr in template_expressions(value):
            try:
                parse(expr)
            except ExpressionError as exc:
                errors.append(str(exc))
    elif isinstance(value, list):
        for item in value:
            errors.extend(check_templates(item))
    elif isinstance(value, dict):
        for item in value.values():
            errors.extend(check_templates(item))
    return errors
