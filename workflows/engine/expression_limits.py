"""The bounds every condition and template evaluation runs under (docs/graph-format.md).

An evaluation has a budget of steps: one per syntax node evaluated, one per item of a container it
builds, walks, compares or copies, one per 16 characters of text it builds, compares or renders,
and more for big-integer arithmetic and number-text conversions (by their digits). Running out is
an ExpressionLimit, never a wall-clock check, so the work an evaluation may do is the same on every
machine: at roughly half a microsecond of CPU per step, MAX_STEPS is some tens of milliseconds. So
is the memory: each allocation is sized before it is made and paid for from the same budget, so all
the text an evaluation builds is at most MAX_STEPS * CHARS_PER_STEP characters however it is built.

Everything here is checked *before* the operation that would allocate (the size of `s * n`,
`a ** b`, `s.replace(a, b)`... is predicted from the operands), except for the few operations whose
result is at most a small constant factor of an operand already within bounds (`upper` may grow a
text threefold), which are checked right after.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from workflows.engine.errors import ExpressionError

MAX_STEPS = 100_000          # per evaluation (per rendered node config for templates)
CHARS_PER_STEP = 16          # text built, compared or rendered costs one step per 16 characters
MAX_TEXT_CHARS = 65_536      # a string built by an operation (formatting, methods, +, *, str())
MAX_ITEMS = 10_000           # a list/tuple/set/dict built, counting the items of containers inside
MAX_INT_BITS = 4_096         # an integer operand or result (about 1,233 decimal digits)
MAX_RENDERED_CHARS = 1_048_576  # one template string after its placeholders are filled in


class MissingValue(ExpressionError):
    """The expression names a value the context does not hold (yet)."""


class ExpressionLimit(ExpressionError):
    """An evaluation would pass one of the bounds above."""


class Budget:
    """The steps left to one evaluation."""

    __slots__ = ("left",)

    def __init__(self, steps: int = MAX_STEPS) -> None:
        self.left = steps

    def charge(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise ExpressionLimit(f"needs more than {MAX_STEPS} evaluation steps (the limit per evaluation)")

    def charge_text(self, chars: int) -> None:
        if chars >= CHARS_PER_STEP:
            self.charge(chars // CHARS_PER_STEP)

    def touch(self, value: Any) -> None:
        """Pay for reading `value` through: a comparison, a membership test, a hash."""
        if isinstance(value, str):
            self.charge_text(len(value))
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            self.items(value, limit=None)

    def items(self, value: Any, limit: int | None = MAX_ITEMS) -> int:
        """The items of a container counted through nested containers (shared ones each time they
        appear), paid for one step each; with `limit`, refused past it before anything is built."""
        count = 0
        stack: list[Any] = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                children: Iterable[Any] = item.values()
            elif isinstance(item, (list, tuple, set, frozenset)):
                children = item
            else:
                if isinstance(item, str):
                    self.charge_text(len(item))
                continue
            size = len(item)
            count += size
            self.charge(size + 1)
            if limit is not None and count > limit:
                raise ExpressionLimit(f"would build a collection of more than {limit} items "
                                      "(counting nested ones)")
            stack.extend(children)
        return count


def check_text(length: int, limit: int = MAX_TEXT_CHARS) -> None:
    if length > limit:
        raise ExpressionLimit(f"would build a text of {length} characters ({limit} at most)")


def check_int(value: Any) -> None:
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise ExpressionLimit(f"would use an integer of {value.bit_length()} bits ({MAX_INT_BITS} at most)")


def check_power(base: Any, exponent: Any) -> None:
    """`base ** exponent` for integers, refused before computing when its result would be too big."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        bits = exponent * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise ExpressionLimit(f"would use an integer of about {bits:.0f} bits ({MAX_INT_BITS} at most)")


def check_product(left: Any, right: Any, budget: Budget) -> None:
    """`left * right`, refused before computing: repeated text or collections, or a big product."""
    for seq, times in ((left, right), (right, left)):
        if isinstance(times, int) and isinstance(seq, (str, list, tuple)):
            n = max(times, 0)
            if isinstance(seq, str):
                check_text(len(seq) * n)
                budget.charge_text(len(seq) * n)
            else:
                inner = budget.items(seq) if seq else 0
                if inner * n > MAX_ITEMS:
                    raise ExpressionLimit(f"would build a collection of {inner * n} items ({MAX_ITEMS} at most)")
                budget.charge(inner * n)
            return
    if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise ExpressionLimit(f"would use an integer of about {left.bit_length() + right.bit_length()} bits "
                              f"({MAX_INT_BITS} at most)")


_ENCODER = json.JSONEncoder(sort_keys=True)


def bounded_json(value: Any, budget: Budget, limit: int) -> str:
    """`value` as JSON text, built piece by piece and refused as soon as it passes `limit`: a
    collection that shares one list many times is never written out in full."""
    parts: list[str] = []
    size = 0
    for chunk in _ENCODER.iterencode(value):
        size += len(chunk)
        check_text(size, limit)
        budget.charge(1 + len(chunk) // CHARS_PER_STEP)
        parts.append(chunk)
    return "".join(parts)
