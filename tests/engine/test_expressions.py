"""Conditions and templates: what they can read, what they refuse, and how they fail."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.engine import expressions
from workflows.engine.errors import ExpressionError
from workflows.engine.expressions import MissingValue, condition_names, evaluate, parse, render

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
    # The evaluator is simpleeval's; a name Python's eval would find is unknown here.
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
