"""Conditions and templates: what they can read, what they refuse, and how they fail."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from workflows.engine import expression_limits as lim
from workflows.engine import expressions
from workflows.engine.errors import ExpressionError
from workflows.engine.expressions import (
    Budget,
    ExpressionLimit,
    MissingValue,
    condition_names,
    evaluate,
    parse,
    render,
)

STEPS = {"classify": {"output": {"text": "refund please", "route": "refund"}}}
CONTEXT = {"a": {"b": 42}, "name": "Ada", "amount": 120, "tags": ["x", "y"]}


def names(output: Any = None) -> dict[str, Any]:
    return condition_names(output, CONTEXT, STEPS, {"question": "where?"})


# --- Conditions ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "output", "expected"), [
    ("route == 'search'", {"route": "search"}, True),
    ("route == 'search'", {"route": "answer"}, False),
    ("not approved", {"approved": False}, True),
    ("not approved", {"approved": True}, False),
    ("approved and amount > 100", {"approved": True, "amount": 101}, True),
    ("output.route == 'x'", {"route": "x"}, True),
    ("context.a.b == 42", {}, True),
    ("context['a']['b'] + 1", {}, 43),
    ("steps.classify.output.text", {}, "refund please"),
    ("steps.classify.output.route in ('refund', 'other')", {}, True),
    ("input.question", {}, "where?"),
    ("len(context.tags) == 2", {}, True),
    ("contains(lower(steps.classify.output.text), 'refund')", {}, True),
    ("upper(context.name)", {}, "ADA"),
    ("int('3') + float('0.5')", {}, 3.5),
    ("context.amount >= 100 if context.name else False", {}, True),
])
def test_conditions(expression: str, output: Any, expected: Any) -> None:
    assert evaluate(expression, names(output)) == expected


def test_output_fields_do_not_shadow_the_named_scopes() -> None:
    # An output that has its own "context" key cannot hide the instance context.
    scope = names({"context": "forged", "route": "r"})
    assert evaluate("context.name", scope) == "Ada"
    assert evaluate("output.context", scope) == "forged"


def test_a_non_mapping_output_is_only_reachable_as_output() -> None:
    assert evaluate("output == 'plain'", names("plain")) is True
    with pytest.raises(MissingValue):
        evaluate("route == 'x'", names("plain"))


@pytest.mark.parametrize(("expression", "missing"), [
    ("nope", "'nope' is not defined in 'nope'"),
    ("context.missing", "'missing' does not exist in 'context.missing'"),
    ("context.a.c", "'c' does not exist in 'context.a.c'"),
    ("context['a']['zz']", "'zz' does not exist in \"context['a']['zz']\""),
    ("steps.other.output", "'other' does not exist in 'steps.other.output'"),
])
def test_missing_values_raise_in_conditions(expression: str, missing: str) -> None:
    with pytest.raises(MissingValue) as info:
        evaluate(expression, names({}))
    assert str(info.value) == missing
    assert isinstance(info.value, ExpressionError)


def test_evaluation_errors_are_expression_errors() -> None:
    with pytest.raises(ExpressionError, match=r"ZeroDivisionError: division by zero in '1/0'"):
        evaluate("1/0", {})
    with pytest.raises(ExpressionError, match="TypeError"):
        evaluate("context.name + 1", names())


# --- Safety ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "reason"), [
    ("context.__class__", "access to '__class__' is not allowed"),
    ("context._private", "access to '_private' is not allowed"),
    ("lower.__globals__", "access to '__globals__' is not allowed"),
    ("().__class__.__bases__[0].__subclasses__()", "is not allowed"),
    ("__import__('os').system('true')", "name '__import__' is not allowed"),
    ("__builtins__", "name '__builtins__' is not allowed"),
    ("(lambda: 1)()", "lambda is not allowed"),
    ("(x := 1)", "namedexpr is not allowed"),
])
def test_dangerous_expressions_are_refused_when_parsed(expression: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason.replace("(", r"\(")):
        parse(expression)


@pytest.mark.parametrize("expression", [
    "open('/etc/passwd')",
    "eval('1')",
    "exec('x = 1')",
    "getattr(context, 'a')",
    "type(context)",
    "'{0.__class__}'.format(context)",
    "context.name.format_map({})",
    "str.mro()",
    "lower.func_globals",
    "'a' * 10 ** 9",
    "2 ** 100000000",
])
def test_dangerous_expressions_are_refused_when_evaluated(expression: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(expression, names())


def test_python_eval_is_never_used() -> None:
    # The evaluator is our own (workflows/engine/evaluator.py); a name Python's eval would find is unknown here.
    with pytest.raises(MissingValue):
        evaluate("print", {})


@pytest.mark.parametrize(("expression", "message"), [
    ("route ==", "does not parse: invalid syntax in 'route =='"),
    ("f(", "does not parse: '(' was never closed in 'f('"),
    ("", "expression is empty"),
    ("   ", "expression is empty"),
    ("x = 1", "does not parse: invalid syntax in 'x = 1'"),
])
def test_parse_errors(expression: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(expression)
    assert str(info.value) == message


def test_parse_is_cached() -> None:
    assert parse("context.a.b == 1") is parse("context.a.b == 1")


# --- Templates -------------------------------------------------------------------------------------

def test_a_single_placeholder_keeps_the_native_type() -> None:
    scope = names()
    assert render("{{ context.amount }}", scope) == 120
    assert render("  {{ context.a }} ", scope) == {"b": 42}
    assert render("{{ context.tags }}", scope) == ["x", "y"]
    assert render("{{ context.amount > 100 }}", scope) is True


def test_placeholders_inside_text_render_as_text() -> None:
    scope = names()
    assert render("Hi {{ context.name }}, you owe {{ context.amount }}.", scope) == "Hi Ada, you owe 120."
    assert render("tags: {{ context.tags }}", scope) == 'tags: ["x", "y"]'
    assert render("{{context.name}}{{context.amount}}", scope) == "Ada120"


def test_a_text_starting_and_ending_with_placeholders_is_text() -> None:
    scope = names()
    assert render("{{ context.name }} and {{ context.amount }}", scope) == "Ada and 120"
    assert render("{{ context.name }}{{ context.amount }}", scope) == "Ada120"


def test_missing_values_render_empty_in_templates() -> None:
    scope = names()
    assert render("{{ context.observations }}", scope) is None
    assert render("seen: {{ context.observations }}.", scope) == "seen: ."
    assert render("{{ steps.later.output.text }}!", scope) == "!"


def test_templates_render_through_lists_and_dicts() -> None:
    scope = names()
    value = {"to": "{{ context.name }}", "lines": ["{{ context.amount }}", "fixed", 3], "n": None}
    assert render(value, scope) == {"to": "Ada", "lines": [120, "fixed", 3], "n": None}


def test_a_template_that_does_not_parse_raises_at_render() -> None:
    with pytest.raises(ExpressionError):
        render("{{ context. }}", names())


def test_check_templates_reports_each_bad_placeholder() -> None:
    value = {"a": "{{ ok }} {{ bad ( }}", "b": ["{{ __import__ }}"], "c": 5}
    errors = expressions.check_templates(value)
    assert len(errors) == 2
    assert errors[0].startswith("does not parse:")
    assert errors[1] == "name '__import__' is not allowed in '__import__'"
    assert expressions.check_templates("no placeholders") == []


def test_template_expressions_are_found_in_order() -> None:
    assert expressions.template_expressions("{{a}} x {{ b.c }}") == ["a", "b.c"]


# --- The language: what is allowed ---------------------------------------------------------------

@pytest.mark.parametrize(("expression", "expected"), [
    ("context.name.lower() == 'ada'", True),
    ("context.name.upper().startswith('AD')", True),
    ("'  x '.strip() + context.name.rstrip('a')", "xAd"),
    ("context.name.replace('a', 'o')", "Ado"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("context.name.find('d') + context.name.count('a')", 2),
    ("f'{context.name}: {context.amount}'", "Ada: 120"),
    ("[t.upper() for t in context.tags if t != 'y']", ["X"]),
    ("{t: len(t) for t in context.tags}", {"x": 1, "y": 1}),
    ("any(t == 'y' for t in context.tags) and not all(t == 'y' for t in context.tags)", True),
    ("sum([1, 2.5]) + abs(-1) + round(2.567, 2) + min(3, 4) + max(context.tags == ['x', 'y'], 0)", 11.07),
    ("context.tags[0] + context.name[1:]", "xda"),
    ("str(context.a) + str(context.tags) + str(None)", '{"b": 42}["x", "y"]None'),
    ("context.amount % 7 == 1 and 2 ** 10 == 1024", True),
    ("context.missing is None if 'missing' in context else True", True),
])
def test_the_language(expression: str, expected: Any) -> None:
    result = evaluate(expression, names())
    assert result == pytest.approx(expected) if isinstance(expected, float) else result == expected


@pytest.mark.parametrize(("expression", "reason"), [
    ("context.update({'x': 1})", "method 'update' is not allowed"),
    ("getattr(context, 'a')", "function 'getattr' is not allowed"),
    ("context.name.format()", "method 'format' is not allowed"),
    ("context.name.ljust(10)", "method 'ljust' is not allowed"),
    ("context.tags[0](1)", "only functions and text methods can be called"),
    ("len(context, key=1)", "keyword arguments are not allowed"),
    ("{**context}", "** unpacking is not allowed"),
    ("1 << 3", "operator '<<' is not allowed"),
    ("~1", "operator '~' is not allowed"),
    ("f'{context.name!r}'", "format specifications and conversions are not allowed"),
    ("f'{context.name:>10}'", "format specifications and conversions are not allowed"),
    ("[t for t.x in context.tags]", "a comprehension assigns plain names only"),
    ("b'x'", "bytes constants are not allowed"),
    ("1j", "complex constants are not allowed"),
    ("'a' * 10 ** 9", "would build a text of 1000000000 characters (65536 at most)"),
    ("[1] * 10 ** 6", "would build a collection of 1000000 items (10000 at most)"),
    ("9 ** 9 ** 9", "would use an integer of about"),
    ("1 / 0", "ZeroDivisionError: division by zero"),
    ("'%d' % 1", "% is the remainder of numbers here (no text formatting)"),
])
def test_what_can_be_known_without_the_data_is_refused_when_parsed(expression: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=re.escape(reason)):
        parse(expression)


def test_constant_parts_are_folded_once() -> None:
    tree = parse("route in ('refund', 'other') and amount > 2 ** 10")
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert ("refund", "other") in constants and 1024 in constants


def test_functions_are_not_values() -> None:
    with pytest.raises(MissingValue, match="'len' is not defined"):
        evaluate("len", names())
    with pytest.raises(ExpressionError, match="attributes read a mapping's keys"):
        evaluate("context.name.lower", names())


# --- Limits ----------------------------------------------------------------------------------------

def test_the_text_limit_is_exact() -> None:
    scope = names({"n": lim.MAX_TEXT_CHARS})
    assert len(evaluate("'a' * n", scope)) == lim.MAX_TEXT_CHARS
    with pytest.raises(ExpressionLimit, match=f"would build a text of {lim.MAX_TEXT_CHARS + 1} characters"):
        evaluate("'a' * n + 'b'", scope)
    with pytest.raises(ExpressionLimit):
        evaluate("('a' * n).replace('a', 'aa')", scope)
    with pytest.raises(ExpressionLimit):
        evaluate("f\"{'a' * n}{n}\"", scope)


def test_the_integer_limit_is_checked_before_computing() -> None:
    assert evaluate("2 ** n", names({"n": lim.MAX_INT_BITS - 1})).bit_length() == lim.MAX_INT_BITS
    for expression in ("2 ** n", "(2 ** (n - 1)) * (2 ** (n - 1))", "(10 ** 300) ** n", "int('9' * n)"):
        with pytest.raises(ExpressionLimit, match="bits"):
            evaluate(expression, names({"n": lim.MAX_INT_BITS}))


def test_collections_count_the_items_inside_them() -> None:
    scope = names({"row": list(range(100))})
    assert len(evaluate("[row] * 99", scope)) == 99
    with pytest.raises(ExpressionLimit, match="collection"):
        evaluate("[row] * 100", scope)  # 100 lists of 100: 10,100 items
    with pytest.raises(ExpressionLimit, match="collection"):
        evaluate("[row for x in row]", scope)


def test_the_step_budget_is_deterministic() -> None:
    scope = names({"row": list(range(1000))})
    budget = Budget()
    evaluate("[x for x in row if x > 500]", scope, budget)
    spent = lim.MAX_STEPS - budget.left
    again = Budget()
    evaluate("[x for x in row if x > 500]", scope, again)
    assert lim.MAX_STEPS - again.left == spent
    with pytest.raises(ExpressionLimit, match=f"more than {lim.MAX_STEPS} evaluation steps"):
        evaluate("[x for x in row for y in row if x == y]", scope)  # a million comparisons


def test_comparing_big_values_costs_their_size() -> None:
    scope = names({"row": list(range(9000))})
    with pytest.raises(ExpressionLimit, match="evaluation steps"):
        evaluate("any(row == row for x in row)", scope)


def test_a_template_renders_text_within_its_limit() -> None:
    doc = "y" * (lim.MAX_RENDERED_CHARS // 2 - 10)
    scope = {"context": {"doc": doc}}
    assert len(render("{{ context.doc }} and {{ context.doc }}", scope)) == 2 * len(doc) + 5
    with pytest.raises(ExpressionLimit, match="characters"):
        render("{{ context.doc }}{{ context.doc }}{{ context.doc }}", scope)


def test_one_budget_covers_a_whole_config() -> None:
    scope = {"context": {"row": list(range(9000))}}
    render({"a": "{{ [x for x in context.row] }}"}, scope)
    with pytest.raises(ExpressionLimit, match="evaluation steps"):
        render({k: "{{ [x for x in context.row if x > 0] }}" for k in "abcdefgh"}, scope)


# --- Nothing an expression does changes the data it reads ----------------------------------------

@pytest.mark.parametrize("expression", [
    "context.update({'forged': 1}) or True", "context.setdefault('forged', 1)", "output.pop('route')",
    "context.tags.append('z')", "context.tags.clear()", "context.a.popitem()", "input.clear()",
    "steps.classify.output.update({'route': 'x'})", "context.__setitem__('forged', 1)",
])
def test_conditions_cannot_mutate_what_they_read(expression: str) -> None:
    context = copy.deepcopy(CONTEXT)
    steps = copy.deepcopy(STEPS)
    output = {"route": "refund"}
    scope = condition_names(output, context, steps, {"question": "where?"})
    with pytest.raises(ExpressionError):
        evaluate(expression, scope)
    assert context == CONTEXT and steps == STEPS and output == {"route": "refund"}


def test_a_template_hands_back_copies() -> None:
    context = copy.deepcopy(CONTEXT)
    rendered = render({"tags": "{{ context.tags }}", "a": "{{ context.a }}"}, {"context": context})
    rendered["tags"].append("z")
    rendered["a"]["b"] = 0
    assert context == CONTEXT


def test_unpacking_checks_the_size_before_copying() -> None:
    assert evaluate("[a + b for a, b in [('x', 'y'), 'zw']]", names()) == ["xy", "zw"]
    with pytest.raises(ExpressionError, match="cannot unpack a str into 2 names"):
        evaluate("[a for a, b in [doc]]", names({"doc": "d" * 100_000}))


class LazyOutputs(Mapping[str, Any]):
    """Like the runtime's `steps`: each key is a database read."""

    def __init__(self) -> None:
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        if key != "a":
            raise KeyError(key)
        return {"output": 1}

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1


def test_steps_are_read_one_node_at_a_time() -> None:
    lazy = LazyOutputs()
    scope = condition_names({}, {}, lazy, {})
    assert evaluate("steps.a.output == 1 and 'a' in steps", scope) is True
    with pytest.raises(ExpressionError, match="cannot be compared as a whole"):
        evaluate("steps == {'a': {'output': 1}}", scope)
    assert lazy.reads == 2
