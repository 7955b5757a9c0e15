"""A small evaluator over Python's `ast`, for conditions and templates: only the node types,
operators, functions and text methods listed here exist.

Why not simpleeval (which this replaced): it evaluates whatever Python would for the node types it
knows, then caps a few operations afterwards or by special case. `%` formatting, most string methods
(`ljust`, `zfill`, `replace`, `expandtabs`...), big-integer arithmetic and every method of the live
`context`/`output` dicts (`update`, `setdefault`, `pop`, `append`) went through. Closing those in a
subclass means overriding most of it and tracking its internals; an allow-list of about twenty node
types is shorter and can be read whole. Here nothing is reachable unless listed:

- names: the data given (output fields, output, context, steps, input; comprehension variables);
  functions only as the callee of a call, never as values;
- attributes: a mapping's keys (`context.question`); nothing else is an attribute;
- calls: FUNCTIONS by name and TEXT_METHODS on a string; no keyword arguments, no `*args`;
- no operation mutates anything (no assignment, no method of a dict or list), so `context`,
  `output` and `steps` are read-only to an expression by construction; and a template hands back a
  copy of any collection it reads, so a node cannot change the instance's context through its config.

Each node evaluated, and each item or 16 characters an operation touches, costs a step from the
evaluation's Budget; each result is sized before it is built (workflows/engine/expression_limits.py).
"""

from __future__ import annotations

import ast
import operator
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, cast

from workflows.engine import expression_limits as lim
from workflows.engine.errors import ExpressionError
from workflows.engine.expression_functions import FUNCTION_TABLE, NUMBER, text_method, text_of
from workflows.engine.expression_limits import Budget, ExpressionLimit, MissingValue

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
# Node types with nothing to say for themselves (the rest are evaluated below).
# (ast.Store appears only as a comprehension's target: assignments and `:=` are refused as nodes.)
STRUCTURAL = (ast.Load, ast.Store, ast.And, ast.Or, ast.comprehension, ast.Slice, ast.FormattedValue)


def _count(items: Any, budget: Budget) -> Any:
    budget.touch(items)
    return items


class Evaluator:
    """One evaluation: the names it reads and the budget it spends."""

    __slots__ = ("names", "budget")

    def __init__(self, names: Mapping[str, Any], budget: Budget) -> None:
        self.names = names
        self.budget = budget

    def eval(self, node: ast.AST) -> Any:
        budget = self.budget
        budget.left -= 1  # Budget.charge(1), inlined: this runs for every node of every condition
        if budget.left < 0:
            budget.charge(0)
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise ExpressionError(f"{type(node).__name__} is not allowed")
        return handler(self, node)

    # --- Values ---------------------------------------------------------------------------------

    def constant(self, node: ast.Constant) -> Any:
        return node.value

    def name(self, node: ast.Name) -> Any:
        try:
            return self.names[node.id]
        except KeyError:
            raise MissingValue(f"{node.id!r} is not defined") from None

    def attribute(self, node: ast.Attribute) -> Any:
        value = self.eval(node.value)
        if isinstance(value, Mapping):
            return self._key(value, node.attr)
        raise ExpressionError(f"{node.attr!r} is not available on a {type(value).__name__} "
                              "(attributes read a mapping's keys)")

    def _key(self, mapping: Mapping[Any, Any], key: Any) -> Any:
        self.budget.touch(key)
        try:
            return mapping[key]
        except KeyError:
            raise MissingValue(f"{key!r} does not exist") from None

    def subscript(self, node: ast.Subscript) -> Any:
        value = self.eval(node.value)
        if isinstance(node.slice, ast.Slice):
            parts = [None if part is None else self.eval(part)
                     for part in (node.slice.lower, node.slice.upper, node.slice.step)]
            if not isinstance(value, (str, list, tuple)):
                raise ExpressionError(f"a {type(value).__name__} cannot be sliced")
            size = len(range(*slice(*parts).indices(len(value))))
            if isinstance(value, str):
                lim.check_text(size)
                self.budget.charge_text(size)
                return value[slice(*parts)]
            return self._built(value[slice(*parts)])
        index = self.eval(node.slice)
        if isinstance(value, Mapping):
            return self._key(value, index)
        if isinstance(value, (str, list, tuple)):
            return value[index]
        raise ExpressionError(f"a {type(value).__name__} cannot be indexed")

    def _built(self, value: Any) -> Any:
        """A collection the expression built: within MAX_ITEMS counting nested ones."""
        self.budget.items(value)
        return value

    def tuple_(self, node: ast.Tuple) -> Any:
        return self._built(tuple(self.eval(item) for item in node.elts))

    def list_(self, node: ast.List) -> Any:
        return self._built([self.eval(item) for item in node.elts])

    def set_(self, node: ast.Set) -> Any:
        return self._built({_count(self.eval(item), self.budget) for item in node.elts})

    def dict_(self, node: ast.Dict) -> Any:
        return self._built({_count(self.eval(k), self.budget): self.eval(v)
                            for k, v in zip(node.keys, node.values, strict=True) if k is not None})

    def joined(self, node: ast.JoinedStr) -> str:
        parts = []
        size = 0
        for value in node.values:
            text = text_of(self.eval(value.value if isinstance(value, ast.FormattedValue) else value), self.budget)
            size += len(text)
            lim.check_text(size)
            parts.append(text)
        self.budget.charge_text(size)
        return "".join(parts)

    # --- Operators ------------------------------------------------------------------------------

    def boolean(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for item in node.values:
            value = self.eval(item)
            if isinstance(node.op, ast.And) != bool(value):
                return value
        return value

    def unary(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        lim.check_int(value)
        return UNARY[type(node.op)](value)

    def binary(self, node: ast.BinOp) -> Any:
        left, right, op = self.eval(node.left), self.eval(node.right), type(node.op)
        lim.check_int(left)
        lim.check_int(right)
        if type(left) is int and type(right) is int:
            # Big-integer arithmetic costs with the digits (a 4,096-bit product is 64 steps).
            self.budget.charge((left.bit_length() + right.bit_length()) // 128)
        if op is ast.Mult:
            lim.check_product(left, right, self.budget)
        elif op is ast.Pow:
            lim.check_power(left, right)
        elif op is ast.Mod and not (isinstance(left, NUMBER) and isinstance(right, NUMBER)):
            raise ExpressionError("% is the remainder of numbers here (no text formatting)")
        elif op is ast.Add and isinstance(left, str) and isinstance(right, str):
            lim.check_text(len(left) + len(right))
            self.budget.charge_text(len(left) + len(right))
        elif op is ast.Add and isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            self._built(left)
            self._built(right)
            if len(left) + len(right) > lim.MAX_ITEMS:
                raise ExpressionLimit(f"would build a collection of {len(left) + len(right)} items "
                                      f"({lim.MAX_ITEMS} at most)")
        result = BINARY[op](left, right)
        lim.check_int(result)
        if isinstance(result, (list, tuple)):
            self._built(result)
        return result

    def compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node)
            _charge_comparison(type(op), left, right, self.budget)
            if not COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def if_(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    # --- Calls and comprehensions ---------------------------------------------------------------

    def call(self, node: ast.Call) -> Any:
        args = [self.eval(arg) for arg in node.args]
        func = node.func
        if isinstance(func, ast.Name):
            return FUNCTION_TABLE[func.id](self.budget, *args)
        assert isinstance(func, ast.Attribute)  # checked at parse
        target = self.eval(func.value)
        if not isinstance(target, str):
            raise ExpressionError(f"{func.attr}() is a text method; this is a {type(target).__name__}")
        return text_method(target, func.attr, args, self.budget)

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Any:
        results: list[Any] = []
        for scope in self._loops(node.generators, 0, self.names):
            inner = Evaluator(scope, self.budget)
            if isinstance(node, ast.DictComp):
                results.append((_count(inner.eval(node.key), self.budget), inner.eval(node.value)))
            else:
                results.append(inner.eval(node.elt))
            if len(results) > lim.MAX_ITEMS:
                raise ExpressionLimit(f"would build a collection of more than {lim.MAX_ITEMS} items")
        built: Any = (dict(results) if isinstance(node, ast.DictComp) else
                      set(results) if isinstance(node, ast.SetComp) else results)
        return self._built(built)

    def _loops(self, generators: list[ast.comprehension], index: int,
               scope: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        if index == len(generators):
            yield scope
            return
        loop = generators[index]
        for item in Evaluator(scope, self.budget).eval(loop.iter):
            self.budget.charge(1)
            # A layer over the names, not a copy of them (an output may have thousands of fields).
            inner = ChainMap(_bind(loop.target, item), cast(MutableMapping[str, Any], scope))  # never written
            if all(Evaluator(inner, self.budget).eval(test) for test in loop.ifs):
                yield from self._loops(generators, index + 1, inner)


_SCALARS = frozenset({int, float, bool, type(None)})
_SIZED = (str, list, tuple, dict, set, frozenset)


def _charge_comparison(op: type[ast.cmpop], left: Any, right: Any, budget: Budget) -> None:
    """Pay for a comparison before making it. `a == b` walks at most the smaller of the two (it stops
    at the shorter list, and dicts of different sizes differ at once); `x in list` may compare x with
    every item; `x in dict` hashes x once."""
    if op is ast.In or op is ast.NotIn:
        if isinstance(right, str):
            budget.charge_text(len(right) + (len(left) if isinstance(left, str) else 0))
        elif isinstance(right, (list, tuple)) and (type(left) in _SCALARS or type(left) is str):
            # A number or a text against each item: each comparison costs at most the text's length.
            budget.charge(len(right) * (1 + (len(left) // lim.CHARS_PER_STEP if type(left) is str else 0)))
        else:
            budget.touch(left)  # hashed, or compared with each item of `right`
            if isinstance(right, (list, tuple)):
                budget.touch(right)
        return
    if op is ast.Is or op is ast.IsNot or type(left) in _SCALARS or type(right) in _SCALARS:
        return  # a number against anything answers at once
    if type(left) is str and type(right) is str:
        budget.charge_text(min(len(left), len(right)))
        return
    if (isinstance(left, Mapping) and not isinstance(left, dict)) or (
            isinstance(right, Mapping) and not isinstance(right, dict)):
        # `steps == x` would load every step's output to compare them.
        raise ExpressionError("`steps` cannot be compared as a whole (compare steps.<node>.output)")
    sized = [v for v in (left, right) if isinstance(v, _SIZED)]
    if sized:
        budget.touch(min(sized, key=len))


def _bind(target: ast.expr, item: Any) -> dict[str, Any]:
    if isinstance(target, ast.Name):
        return {target.id: item}
    assert isinstance(target, ast.Tuple)  # checked at parse
    # Sized first: unpacking a long text or list would copy it before finding it does not fit.
    if not isinstance(item, (list, tuple, str)) or len(item) != len(target.elts):
        raise ExpressionError(f"cannot unpack a {type(item).__name__} into {len(target.elts)} names")
    bound: dict[str, Any] = {}
    for name, value in zip(target.elts, item, strict=True):
        bound.update(_bind(name, value))
    return bound


_HANDLERS: dict[type[ast.AST], Callable[[Evaluator, Any], Any]] = {
    ast.Constant: Evaluator.constant, ast.Name: Evaluator.name, ast.Attribute: Evaluator.attribute,
    ast.Subscript: Evaluator.subscript, ast.Tuple: Evaluator.tuple_, ast.List: Evaluator.list_,
    ast.Set: Evaluator.set_, ast.Dict: Evaluator.dict_, ast.JoinedStr: Evaluator.joined,
    ast.BoolOp: Evaluator.boolean, ast.UnaryOp: Evaluator.unary, ast.BinOp: Evaluator.binary,
    ast.Compare: Evaluator.compare, ast.IfExp: Evaluator.if_, ast.Call: Evaluator.call,
    ast.ListComp: Evaluator.comprehension, ast.SetComp: Evaluator.comprehension,
    ast.GeneratorExp: Evaluator.comprehension, ast.DictComp: Evaluator.comprehension,
}
ALLOWED_NODES = (*_HANDLERS, *STRUCTURAL, *BINARY, *UNARY, *COMPARE)
