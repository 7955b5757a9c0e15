"""Every number a graph can set has a documented bound (workflows/engine/limits.py), checked at
validation with a message naming the field and the bound; an operator's grants are bounded too."""

from __future__ import annotations

import copy
import math
from decimal import Decimal
from typing import Any

import pytest

from tests.conftest import chain, halts_as_it_starts
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine import limits
from workflows.engine.errors import GraphInvalid
from workflows.engine.validation import validate_graph
from workflows.models import ReviewItem
from workflows.operators import review

BASE = chain({"id": "work", "type": "python", "config": {"function": "noop"}})


def with_value(path: str, value: Any) -> dict[str, Any]:
    """BASE with one value set: "settings.ttl_s", "work.retry.backoff_s", "work.config.x"..."""
    graph = copy.deepcopy(BASE)
    first, *rest = path.split(".")
    target = graph.setdefault("settings", {}) if first == "settings" else next(
        n for n in graph["nodes"] if n["id"] == first)
    for key in rest[:-1]:
        target = target.setdefault(key, {})
    target[rest[-1]] = value
    return graph


def wait_node(seconds: Any) -> dict[str, Any]:
    return chain({"id": "work", "type": "wait", "config": {"seconds": seconds}})


def llm_node(**config: Any) -> dict[str, Any]:
    return chain({"id": "work", "type": "llm", "config": {"provider": "scripted", "prompt": "p",
                                                          "script": [{"text": "x"}], **config}})


def http_node(timeout: Any) -> dict[str, Any]:
    return chain({"id": "work", "type": "http", "config": {"url": "http://example.com", "timeout_s": timeout}})


BOUNDED: list[tuple[str, Any, Any]] = [
    # (what, graph at the bound, graph past it)
    ("settings.max_transitions", with_value("settings.max_transitions", limits.MAX_TRANSITIONS),
     with_value("settings.max_transitions", limits.MAX_TRANSITIONS + 1)),
    ("settings.ttl_s", with_value("settings.ttl_s", limits.MAX_TTL_S), with_value("settings.ttl_s", 1e30)),
    ("settings.max_concurrency", with_value("settings.max_concurrency", limits.MAX_CONCURRENCY),
     with_value("settings.max_concurrency", 10**18)),
    ("settings.budget_usd", with_value("settings.budget_usd", limits.MAX_BUDGET_USD),
     with_value("settings.budget_usd", 1e30)),
    ("settings.budget_tokens", with_value("settings.budget_tokens", limits.MAX_BUDGET_TOKENS),
     with_value("settings.budget_tokens", 10**30)),
    ("timeout_s", with_value("work.timeout_s", limits.MAX_STEP_TIMEOUT_S), with_value("work.timeout_s", 1e300)),
    ("retry.max_attempts", with_value("work.retry.max_attempts", limits.MAX_ATTEMPTS),
     with_value("work.retry.max_attempts", 10**9)),
    ("retry.backoff_s", with_value("work.retry.backoff_s", limits.MAX_BACKOFF_S),
     with_value("work.retry.backoff_s", 1e30)),
    ("retry.max_backoff_s", with_value("work.retry.max_backoff_s", limits.MAX_BACKOFF_S),
     with_value("work.retry.max_backoff_s", 1e30)),
    ("compensate.retry.backoff_s", with_value("work.compensate.retry.backoff_s", 1),
     with_value("work.compensate.retry.backoff_s", 1e30)),
    ("compensate.timeout_s", with_value("work.compensate.timeout_s", 1), with_value("work.compensate.timeout_s", 1e30)),
    ("position.x", with_value("work.position.x", -limits.MAX_POSITION), with_value("work.position.x", 1e300)),
    ("config.seconds", wait_node(limits.MAX_WAIT_S), wait_node(1e30)),
    ("config.max_tokens", llm_node(max_tokens=limits.MAX_LLM_TOKENS), llm_node(max_tokens=10**20)),
    ("config.script.0.delay_s", llm_node(script=[{"delay_s": limits.MAX_SCRIPT_DELAY_S}]),
     llm_node(script=[{"delay_s": 1e30}])),
    ("config.timeout_s", http_node(limits.MAX_STEP_TIMEOUT_S), http_node(1e30)),
]


@pytest.mark.parametrize(("field", "at_bound", "past_bound"), BOUNDED, ids=[b[0] for b in BOUNDED])
def test_each_number_is_accepted_at_its_bound_and_refused_past_it(field: str, at_bound: dict[str, Any],
                                                                 past_bound: dict[str, Any]) -> None:
    if field == "compensate.retry.backoff_s" or field == "compensate.timeout_s":
        for graph in (at_bound, past_bound):
            graph["nodes"][1]["compensate"]["type"] = "python"
            graph["nodes"][1]["compensate"]["config"] = {"function": "noop"}
    assert validate_graph(at_bound) == []
    issues = validate_graph(past_bound)
    assert issues, field
    assert any(field in issue.message and "is greater than the maximum" in issue.message for issue in issues), \
        [i.message for i in issues]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_graph_holding_a_non_finite_number_is_refused_before_any_schema_check(value: float) -> None:
    for graph in (with_value("settings.budget_usd", value), with_value("work.config.args", {"x": [value]})):
        issues = validate_graph(graph)
        assert len(issues) == 1 and "not finite" in issues[0].message


def test_a_graph_nested_past_the_limit_is_refused_without_recursion() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = {"a": deep}
    issues = validate_graph(with_value("work.config.args", deep))
    assert len(issues) == 1 and "nested too deeply" in issues[0].message


def test_saving_refuses_an_unbounded_budget(db: None) -> None:
    with pytest.raises(GraphInvalid) as caught:
        save_version("huge-budget", with_value("settings.budget_usd", 1e30))
    assert "settings.budget_usd" in caught.value.issues[0].message


@pytest.fixture
def halted_item(db: None, django_user_model: Any) -> ReviewItem:
    """An instance halted by the loop breaker as it starts (its start fans out past max_transitions)."""
    version = save_version("bounded-grants", halts_as_it_starts())
    instance = runtime.start_instance(version, {})
    return ReviewItem.objects.get(instance=instance, status="open", reason="loop_breaker")


@pytest.mark.parametrize(("grant", "value", "words"), [
    ("extra_budget_usd", "1e30", "at most"),
    ("extra_budget_usd", "NaN", "not a number"),
    ("extra_budget_usd", "Infinity", "not a number"),
    ("extra_transitions", 10**30, "at most"),
    ("extra_tokens", 10**30, "at most"),
    ("extra_ttl_s", 1e300, "at most"),
    ("extra_transitions", True, "not a number"),
])
def test_review_grants_past_their_bound_are_refused(halted_item: ReviewItem, django_user_model: Any, grant: str,
                                                     value: Any, words: str) -> None:
    operator = django_user_model.objects.create_superuser("olga")
    with pytest.raises(review.ReviewError, match=words):
        review.decide(halted_item.pk, operator, review.Decision(action="approve", **{grant: value}))
    halted_item.refresh_from_db()
    assert halted_item.status == "open"
    assert halted_item.instance.budget_usd is None or halted_item.instance.budget_usd < Decimal(10**8)
