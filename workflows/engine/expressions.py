"""Conditions and templates, evaluated by a bounded evaluator of our own (never Python's eval).

Names visible to an expression: the source step's output fields at top level (so `route == 'x'`
and `approved` read naturally), plus `output`, `context`, `steps` and `input`. Dict keys read as
attributes (`context.question`). What the language holds and why it is its own evaluator:
workflows/engine/evaluator.py; the limits an evaluation runs under: workflows/engine/expression_limits.py.

`parse` refuses at save what can be known without the data: node types, operators, functions and
methods outside the allow-list, and constant parts that would pass a limit (`'a' * 10**9`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from workflows.engine import expression_limits as lim
from workflows.engine.errors import ExpressionError
from workflows.engine.evaluator import ALLOWED_NODES, Evaluator
from workflows.engine.expression_functions import FUNCTIONS, TEXT_METHODS, text_of
from workflows.engine.expression_limits import Budget, ExpressionLimit, MissingValue

__all__ = ["Budget", "ExpressionError", "ExpressionLimit", "MissingValue", "check_templates", "condition_names",
           "count_expressions", "evaluate", "parse", "parse_cache_clear", "parse_cache_info", "render",
           "template_expressions"]

_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")

# Conditions and templates are short; these bounds keep a hostile one from costing the parser or the
# evaluator's recursion anything (docs/graph-format.md).
MAX_EXPRESSION_CHARS = 2000
MAX_EXPRESSION_DEPTH = 50
_REFUSED_OPERATORS = {ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
                      ast.MatMult: "@", ast.Invert: "~"}
_CONSTANT_TYPES = (str, int, float, bool, type(None))
_FOLDED_MOST = 1000  # items plus characters of one folded constant


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


def parse(expression: str) -> ast.expr:
    """Parse, check against the allow-list and fold constants, once (cached, a failure too: the same
    bad expression sent again costs a lookup); raises ExpressionError with the reason."""
    parsed = _parsed_or_error(expression)
    if isinstance(parsed, str):
        raise ExpressionError(parsed)
    return parsed


@lru_cache(maxsize=8192)
def _parsed_or_error(expression: str) -> ast.expr | str:
    try:
        return _parse(expression)
    except ExpressionError as exc:
        return str(exc)


parse_cache_info = _parsed_or_error.cache_info
parse_cache_clear = _parsed_or_error.cache_clear


def count_expressions(graph: Mapping[str, Any]) -> int:
    """Template placeholders in every string of `graph` plus its edges' conditions: what validating
    it would parse at most (limits.MAX_GRAPH_EXPRESSIONS). Linear, no parsing; iterative (a deep
    graph is refused before, by the JSON depth check)."""
    count = 0
    stack: list[Any] = [graph]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            count += item.count("{{")
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    edges, nodes = graph.get("edges"), graph.get("nodes")
    conditions = [edge.get("when") for edge in (edges if isinstance(edges, list) else []) if isinstance(edge, Mapping)]
    for node in nodes if isinstance(nodes, list) else []:
        config = node.get("config") if isinstance(node, Mapping) else None
        rules = config.get("rules") if isinstance(config, Mapping) else None
        conditions += [rule.get("when") for rule in (rules if isinstance(rules, list) else [])
                       if isinstance(rule, Mapping)]
    return count + sum(1 for when in conditions if isinstance(when, str) and when.strip())


def _parse(expression: str) -> ast.expr:
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
        # The evaluator recurses once per level; refuse at save, not at run time.
        raise ExpressionError(f"is nested too deeply ({MAX_EXPRESSION_DEPTH} levels at most) in "
                              f"{_short(expression)}")
    nodes = list(ast.walk(tree.body))
    # Reaching for internals (`__import__`, `x.__class__`) is named first, whatever else is wrong.
    for check in (_internal, _foreign, _refused):
        problem = next((found for found in map(check, nodes) if found), None)
        if problem:
            raise ExpressionError(f"{problem} in {_short(expression)}")
    try:
        # One budget for all the constant parts: parsing costs no more than one evaluation.
        return _fold(tree.body, Budget())
    except ExpressionError as exc:
        raise ExpressionError(f"{exc} in {_short(expression)}") from None
    except Exception as exc:  # noqa: BLE001 - a constant part that can only fail (`1/0`, `int('x')`)
        raise ExpressionError(f"{type(exc).__name__}: {exc} in {_short(expression)}") from None


def _internal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        return f"access to {node.attr!r} is not allowed"
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        return f"name {node.id!r} is not allowed"
    return None


def _foreign(node: ast.AST) -> str | None:
    """A node type or operator outside the allow-list."""
    if isinstance(node, ast.keyword):
        return "keyword arguments are not allowed"
    if type(node) in _REFUSED_OPERATORS:
        return f"operator {_REFUSED_OPERATORS[type(node)]!r} is not allowed"
    if not isinstance(node, ALLOWED_NODES):
        return f"{type(node).__name__.lower()} is not allowed"
    return None


def _refused(node: ast.AST) -> str | None:
    """Why the allow-list refuses this (allowed type of) node, or None."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, _CONSTANT_TYPES):
        return f"{type(node.value).__name__} constants are not allowed"
    if isinstance(node, ast.Dict) and None in node.keys:
        return "** unpacking is not allowed"
    if isinstance(node, ast.FormattedValue) and (node.conversion != -1 or node.format_spec is not None):
        return "format specifications and conversions are not allowed in f-strings"
    if isinstance(node, ast.comprehension):
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if node.is_async or not all(isinstance(t, ast.Name) for t in targets):
            return "a comprehension assigns plain names only"
    if isinstance(node, ast.Call):
        return _refused_call(node)
    return None


def _refused_call(node: ast.Call) -> str | None:
    if node.keywords:
        return "keyword arguments are not allowed"
    func = node.func
    if isinstance(func, ast.Name) and func.id not in FUNCTIONS:
        return f"function {func.id!r} is not allowed (functions: {', '.join(sorted(FUNCTIONS))})"
    if isinstance(func, ast.Attribute) and func.attr not in TEXT_METHODS:
        return f"method {func.attr!r} is not allowed (text methods: {', '.join(sorted(TEXT_METHODS))})"
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return "only functions and text methods can be called"
    return None


def _has_names(node: ast.AST) -> bool:
    return any(isinstance(child, ast.Name) for child in ast.walk(node))


def _immutable(value: Any, room: list[int]) -> bool:
    """Immutable and small: a folded constant is kept with the parse (cached), so it may not be a
    64 KiB text or a 10,000-item tuple; `room` is the items and characters left to it."""
    room[0] -= 1 + (len(value) if isinstance(value, str) else 0)
    if room[0] < 0:
        return False
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(item, room) for item in value)
    return isinstance(value, _CONSTANT_TYPES)


def _fold(node: ast.expr, budget: Budget) -> ast.expr:
    """Evaluate the parts that read no names, once: one that fails (passes a limit, divides by
    zero) would fail every time it is reached, so it is refused now; an immutable result replaces
    its part (`route in ('a', 'b')` builds no tuple per evaluation)."""
    if isinstance(node, ast.Constant):
        return node
    if not _has_names(node):
        if isinstance(node, (ast.Slice, ast.FormattedValue)):  # parts of a node, not values
            return node
        value = Evaluator({}, budget).eval(node)
        if isinstance(value, set):
            value = frozenset(value)
        return ast.copy_location(ast.Constant(value=value), node) if _immutable(value, [_FOLDED_MOST]) else node
    _fold_inside(node, budget)
    return node


def _fold_inside(node: ast.AST, budget: Budget) -> None:
    for field, old in ast.iter_fields(node):
        if isinstance(old, ast.expr):
            setattr(node, field, _fold(old, budget))
        elif isinstance(old, ast.AST):  # a comprehension's `for ... in ... if ...`
            _fold_inside(old, budget)
        elif isinstance(old, list):
            for i, item in enumerate(old):
                if isinstance(item, ast.expr):
                    old[i] = _fold(item, budget)
                elif isinstance(item, ast.AST):
                    _fold_inside(item, budget)


def evaluate(expression: str, names: Mapping[str, Any], budget: Budget | None = None) -> Any:
    """The expression's value, within `budget` (a fresh one of MAX_STEPS when not given)."""
    parsed = parse(expression)
    try:
        return Evaluator(names, budget or Budget()).eval(parsed)
    except ExpressionError as exc:
        raise type(exc)(f"{exc} in {expression!r}") from None
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


def render(value: Any, names: Mapping[str, Any], budget: Budget | None = None) -> Any:
    """Render `{{ expr }}` placeholders in strings, recursively through lists and dicts, all within
    one budget (a node's whole config renders within MAX_STEPS).

    A string that is exactly one placeholder keeps the value's type (an amount stays a number); a
    collection comes back as a copy, so nothing downstream can change the context through it.
    Placeholders inside text render as text; each rendered string is at most MAX_RENDERED_CHARS.
    """
    budget = budget or Budget()
    if isinstance(value, str):
        match = _TEMPLATE.fullmatch(value.strip())
        # "{{ a }} and {{ b }}" also fullmatches (the group swallows "a }} and {{ b"): one placeholder only.
        if match and len(_TEMPLATE.findall(value)) == 1:
            return _copied(_lenient(match.group(1), names, budget), budget)
        return _filled(value, names, budget)
    if isinstance(value, list):
        return [render(item, names, budget) for item in value]
    if isinstance(value, dict):
        return {key: render(item, names, budget) for key, item in value.items()}
    return value


def _filled(text: str, names: Mapping[str, Any], budget: Budget) -> str:
    parts: list[str] = []
    size = 0
    last = 0
    for match in _TEMPLATE.finditer(text):
        parts.append(text[last:match.start()])
        value = _lenient(match.group(1), names, budget)
        parts.append("" if value is None else text_of(value, budget, lim.MAX_RENDERED_CHARS - size))
        size += len(parts[-2]) + len(parts[-1])
        lim.check_text(size, lim.MAX_RENDERED_CHARS)
        budget.charge_text(len(parts[-1]))
        last = match.end()
    parts.append(text[last:])
    return "".join(parts)


def _copied(value: Any, budget: Budget) -> Any:
    if isinstance(value, Mapping):
        budget.charge(len(value) + 1)
        return {key: _copied(item, budget) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        budget.charge(len(value) + 1)
        return [_copied(item, budget) for item in value]
    return value


def _lenient(expression: str, names: Mapping[str, Any], budget: Budget) -> Any:
    # A template naming a value not set yet renders empty (like `{{ context.observations }}` before
    # the first observation); conditions stay strict, since a typo there silently misroutes.
    try:
        return evaluate(expression, names, budget)
    except MissingValue:
        return None


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
