"""The functions and text methods expressions may call (workflows/engine/evaluator.py), each
paying from the evaluation's Budget and sizing its result before building it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflows.engine import expression_limits as lim
from workflows.engine.errors import ExpressionError
from workflows.engine.expression_limits import Budget, ExpressionLimit

TEXT_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "replace",
                          "split", "count", "find"})
NUMBER = (int, float)


def text_of(value: Any, budget: Budget, limit: int = lim.MAX_TEXT_CHARS) -> str:
    """str() as expressions see it: a collection as its JSON text; every result bounded."""
    if isinstance(value, str):
        return value
    if type(value) is int:
        budget.charge(value.bit_length() // 8)  # decimal conversion is quadratic in the digits
        return str(value)
    if value is None or isinstance(value, (bool, float)):
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        return lim.bounded_json(value, budget, limit)
    raise ExpressionError(f"a {type(value).__name__} has no text form here")


def _int(budget: Budget, value: Any, *base: Any) -> int:
    if isinstance(value, str):
        lim.check_text(len(value), lim.MAX_INT_BITS)
        budget.charge(len(value) // 4)  # decimal conversion is quadratic in the digits
    result = int(value, *base)
    lim.check_int(result)
    return result


def _float(budget: Budget, value: Any) -> float:
    if isinstance(value, str):
        budget.charge_text(len(value))
    return float(value)


def _case(method: str) -> Callable[..., str]:
    def change(budget: Budget, value: Any) -> str:
        text = text_of(value, budget)
        lim.check_text(len(text))
        result: str = getattr(text, method)()
        lim.check_text(len(result))  # upper() may grow a text (ß -> SS): at most threefold
        budget.charge_text(len(text) + len(result))
        return result
    return change


def _contains(budget: Budget, haystack: Any, needle: Any) -> bool:
    budget.touch(haystack)
    budget.touch(needle)
    return needle in haystack


def _iterable(budget: Budget, args: tuple[Any, ...]) -> Any:
    items = args[0] if len(args) == 1 else args
    budget.touch(items)
    return items


def _sum(budget: Budget, items: Any) -> Any:
    total: Any = 0
    for item in _iterable(budget, (items,)):
        if not isinstance(item, NUMBER):
            raise ExpressionError("sum() adds numbers only")
        total += item
        lim.check_int(total)
    return total


def _round(budget: Budget, value: Any, digits: Any = None) -> Any:
    if digits is not None and (not isinstance(digits, int) or abs(digits) > 100):
        raise ExpressionError("round() takes at most 100 digits")
    lim.check_int(value)
    return round(value) if digits is None else round(value, digits)


FUNCTION_TABLE: dict[str, Callable[..., Any]] = {
    "len": lambda budget, value: len(value),
    "str": lambda budget, value: text_of(value, budget),
    "int": _int,
    "float": _float,
    "bool": lambda budget, value: bool(value),
    "lower": _case("lower"),
    "upper": _case("upper"),
    "contains": _contains,
    "abs": lambda budget, value: abs(value),
    "round": _round,
    "min": lambda budget, *args: min(_iterable(budget, args)),
    "max": lambda budget, *args: max(_iterable(budget, args)),
    "sum": _sum,
    "any": lambda budget, items: any(_iterable(budget, (items,))),
    "all": lambda budget, items: all(_iterable(budget, (items,))),
}
FUNCTIONS = frozenset(FUNCTION_TABLE)


def text_method(text: str, method: str, args: list[Any], budget: Budget) -> Any:
    for arg in args:
        if not isinstance(arg, (str, tuple)) and not (method in ("count", "find", "split") and isinstance(arg, int)):
            raise ExpressionError(f"{method}() takes text arguments here")
        if isinstance(arg, tuple):
            budget.charge(len(arg))  # startswith(('a', 'b', ...)) tries each
        budget.touch(arg)
    if method not in ("startswith", "endswith"):  # these read only as much as their argument
        budget.charge_text(len(text))
    if method == "replace":
        old, new = (args + ["", ""])[:2]
        if not old:
            raise ExpressionError("replace() needs a non-empty text to replace")
        size = len(text) + text.count(old) * (len(new) - len(old))
        lim.check_text(size)
        budget.charge_text(size)
    elif method == "split":
        if not args or not isinstance(args[0], str) or not args[0]:
            raise ExpressionError("split() needs a non-empty separator")
        if text.count(args[0]) + 1 > lim.MAX_ITEMS:
            raise ExpressionLimit(f"would build a collection of more than {lim.MAX_ITEMS} items")
    elif method in ("lower", "upper"):
        return _case(method)(budget, text)
    result = getattr(text, method)(*args)
    if isinstance(result, list):
        budget.charge(len(result))
    elif isinstance(result, str):
        lim.check_text(len(result))  # strip(): never longer than the text it came from
    return result
