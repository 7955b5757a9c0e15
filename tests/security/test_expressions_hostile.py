"""Hostile conditions and templates (issue 10): what simpleeval let through now hits a limit, with a
clear non-500 answer: refused at save or by the expression checker, a 400 at start, a failed step
naming its node and edge. Nothing an expression does changes the instance's data, and a node's
templates render inside its time limit."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import edge, py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine import expression_limits as lim
from workflows.engine.errors import ExpressionError
from workflows.engine.expressions import ExpressionLimit, condition_names, evaluate, parse, render
from workflows.engine.validation import validate_graph
from workflows.models import WorkflowInstance
from workflows.workers import dispatch

# Each allocated tens of MB or more, or ran for seconds, under simpleeval (the sizes here are kept
# small enough that the old evaluator answered quickly, so these fail rather than hang without the fix).
HOSTILE_WITH_DATA = [
    "len('%0*d' % (n, 1)) > 0",
    "len('%s' % (s * 10)) > 0",
    "len(s.ljust(n)) > 0",
    "len(s.center(n)) > 0",
    "len(s.zfill(n)) > 0",
    "len(s.expandtabs(n)) > 0",
    "len(s.replace('a', s)) > 0",
    "len(s.join([s] * 1000)) > 0",
    "len('{:>{}}'.format(1, n)) > 0",
    "(10 ** 300) ** (n // 1000000) > 0",
    "(1 << (n // 1000)) > 0",
    "k ** (k * k) > 0",
]


def scope() -> dict[str, Any]:
    return condition_names({"n": 10**7, "s": "a" * 5000, "k": 100}, {}, {}, {})


@pytest.mark.parametrize("expression", HOSTILE_WITH_DATA)
def test_hostile_conditions_are_refused_before_they_allocate(expression: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(expression)
        evaluate(expression, scope())
    assert any(word in str(info.value) for word in ("not allowed", "would", "remainder of numbers"))


@pytest.mark.parametrize("expression", [
    "'a' * 10 ** 9", "[1] * 10 ** 9", "9 ** 9 ** 9", "(10 ** 300) ** (10 ** 300)", "str(10 ** 5000)",
    "'x' * 60000 + 'y' * 60000", "len([[1] * 9000] * 9000)",
])
def test_constant_blowups_are_refused_at_save(expression: str) -> None:
    with pytest.raises(ExpressionError, match="would|evaluation steps"):
        parse(expression)
    graph = chain(py("work", "tests.echo"))
    graph["edges"][-1]["when"] = expression
    issues = validate_graph(graph)
    assert [issue.field for issue in issues] == ["when"]
    assert issues[0].message.startswith("edge 2 (work -> end): condition ")


def test_every_evaluation_is_bounded_by_its_budget() -> None:
    rows = {"row": list(range(5000))}
    for expression in ("[x for x in row for y in row if x == y]", "sum([1 for x in row for y in row]) > 0",
                       "any(row == [y for y in row] for x in row)", "[str(x) * 10 for x in row for y in row]"):
        with pytest.raises(ExpressionLimit):
            evaluate(expression, condition_names(rows, {}, {}, {}))


def test_conditions_cannot_write_into_context_or_output() -> None:
    context = {"tags": ["a"], "n": 1}
    output = {"route": "r"}
    names = condition_names(output, context, {}, {})
    for expression in ("context.update({'big': 'x' * 100}) or True", "output.setdefault('x', 1)",
                       "output.pop('route')", "context.tags.append('b')", "context.tags.extend(context.tags)"):
        with pytest.raises(ExpressionError, match="is not allowed"):
            evaluate(expression, names)
    assert context == {"tags": ["a"], "n": 1} and output == {"route": "r"}
    rendered = render("{{ context.tags }}", {"context": context})
    rendered.append("b")
    assert context["tags"] == ["a"]


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    jobs: list[int] = []
    monkeypatch.setattr(dispatch, "enqueue_steps",
                        lambda items, **options: jobs.extend(step for step, _ in items) or len(items))
    return jobs


def run_all(jobs: list[int]) -> None:
    while jobs:
        runtime.run_step(jobs.pop(0), "w")


@pytest.mark.django_db(transaction=True)
def test_a_condition_past_a_limit_fails_its_step_naming_the_node_and_edge(enqueued: list[int]) -> None:
    graph = {"nodes": [{"id": "start", "type": "start"}, py("work", "tests.echo"), {"id": "end", "type": "end"}],
             "edges": [edge("start", "work"), edge("work", "end", "context.s.replace('a', context.s) == ''")]}
    instance = runtime.start_instance(save_version("hostile-condition", graph), {"s": "a" * 5000})
    run_all(enqueued)
    instance.refresh_from_db()
    assert instance.status == "failed"
    assert instance.error["node"] == "work"
    assert "the condition of edge 2 (work -> end) failed: would build a text of 25000000 characters" in \
        instance.error["message"]


@pytest.mark.django_db(transaction=True)
def test_a_start_condition_that_fails_is_a_400_and_starts_nothing(admin_client_: Client, enqueued: list[int]) -> None:
    graph = {"nodes": [{"id": "start", "type": "start"}, py("work", "tests.echo"), {"id": "end", "type": "end"}],
             "edges": [edge("start", "work", "context.s * n == ''"), edge("work", "end")]}
    save_version("hostile-start", graph)
    for body, words in (({"s": "ab", "n": 10**6}, "would build a text of 2000000 characters"),
                        ({"s": "ab"}, "'n' is not defined")):
        response = admin_client_.post("/api/workflows/hostile-start/instances", data={"input": body},
                                      content_type="application/json")
        assert response.status_code == 400, response.content
        message = json.loads(response.content)["message"]
        assert "edge 1 (start -> work)" in message and words in message
        response = admin_client_.post("/api/workflows/hostile-start/instances/bulk",
                                      data={"inputs": [{"s": "", "n": 1}, body]}, content_type="application/json")
        assert response.status_code == 400 and words in json.loads(response.content)["message"]
    assert not WorkflowInstance.objects.exists() and not enqueued


@pytest.mark.django_db
@pytest.mark.parametrize("expression", [
    "'a' * 10 ** 9", "9 ** 9 ** 9 ** 9", "'%s' % 1", "context.update({})", "'x'.ljust(10 ** 9)",
    "[1] * 10 ** 9 == []", "1 << 10 ** 8", "'{:>999999999}'.format(1)",
])
def test_the_expression_checker_refuses_blowups_without_a_500(admin_client_: Client, expression: str) -> None:
    response = admin_client_.post("/api/expressions/check", data={"expression": expression},
                                  content_type="application/json")
    assert response.status_code == 200
    data = json.loads(response.content)
    assert data["valid"] is False and data["message"].startswith("condition ")


@pytest.mark.django_db(transaction=True)
def test_templates_render_inside_the_steps_time_limit(enqueued: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    from workflows.runtime import loop, step_calls, timeouts

    limited: list[bool] = []
    inside: list[bool] = [False]
    original_build = step_calls.build_call

    @contextlib.contextmanager
    def recording_limit(seconds: float, what: str) -> Iterator[None]:
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    def recording_build(claim: Any, now: Any = None, **options: Any) -> Any:
        limited.append(inside[0])
        return original_build(claim, now, **options)

    monkeypatch.setattr(timeouts, "time_limit", recording_limit)
    monkeypatch.setattr(loop, "build_call", recording_build)
    graph = chain(py("work", "tests.echo", args={"text": "{{ context.s }}"}))
    runtime.start_instance(save_version("timed-template", graph), {"s": "x"})
    run_all(enqueued)
    assert limited == [True]


def test_a_template_cannot_render_past_its_text_limit() -> None:
    doc = "d" * 300_000
    with pytest.raises(ExpressionLimit, match=f"at most|{lim.MAX_STEPS}"):
        render("{{ context.doc }}" * 4, {"context": {"doc": doc}})


@pytest.mark.django_db(transaction=True)
def test_a_human_answer_whose_condition_fails_is_refused_with_the_reason(enqueued: list[int], user_in: Any) -> None:
    from workflows.models import ReviewItem
    from workflows.operators import review

    graph = {"nodes": [{"id": "start", "type": "start"},
                       {"id": "ask", "type": "human", "config": {"prompt": "{{ context.s * 3 }}?"}},
                       {"id": "end", "type": "end"}],
             "edges": [edge("start", "ask"), edge("ask", "end", "approved and context.s * context.n == ''")]}
    instance = runtime.start_instance(save_version("hostile-answer", graph), {"s": "ab", "n": 10**6})
    item = ReviewItem.objects.get(instance=instance)
    assert item.details["prompt"] == "ababab?"
    with pytest.raises(review.ReviewError, match=r"node 'ask': the condition of edge 2 \(ask -> end\) failed: "
                                                 "would build a text of 2000000 characters"):
        review.decide(item.pk, user_in("operators", "olga"), review.Decision(action="approve"))
    instance.refresh_from_db()
    assert instance.status == "waiting"
