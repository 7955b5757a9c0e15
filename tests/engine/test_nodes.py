"""Node kinds without I/O: start, end, router, wait, python, human; the registry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import NOW, make_call
from workflows.engine.errors import ConfigError, PermanentStepError
from workflows.engine.functions import FunctionCall, FunctionResult, function_names, register_function
from workflows.engine.nodes import get_kind, known_kinds
from workflows.engine.nodes.base import NodeResult

# --- Registry --------------------------------------------------------------------------------------

def test_every_builtin_kind_is_registered_with_a_schema() -> None:
    kinds = known_kinds()
    for name in ("start", "end", "llm", "router", "http", "python", "human", "wait"):
        kind = kinds[name]
        assert kind.name == name
        assert kind.config_schema["type"] == "object"
        described = kind.describe()
        assert described["name"] == name and described["schema"] is kind.config_schema
    assert get_kind("http").default_queue == "io"
    assert get_kind("llm").default_queue == "ai" and get_kind("llm").is_async
    assert get_kind("python").default_queue == "default"
    assert get_kind("start").structural and get_kind("end").structural
    assert get_kind("human").awaits_person and not get_kind("python").awaits_person


def test_known_kinds_is_a_copy() -> None:
    kinds = known_kinds()
    kinds.pop("llm")
    assert "llm" in known_kinds()


# --- Start, end, human ----------------------------------------------------------------------------

def test_start_outputs_the_start_input_and_end_outputs_nothing() -> None:
    assert get_kind("start").run(make_call("start", start_input={"q": 1})).output == {"q": 1}
    assert get_kind("end").run(make_call("end")) == NodeResult(output=None)


def test_a_human_task_is_never_run_by_a_worker() -> None:
    with pytest.raises(PermanentStepError, match="answered in the review queue"):
        get_kind("human").run(make_call("human", {"prompt": "ok?"}))


# --- Router ----------------------------------------------------------------------------------------

RULES = {"rules": [{"when": "amount > 1000", "route": "manager"},
                   {"when": "amount > 100", "route": "clerk"},
                   {"when": "vip", "route": "clerk"}],
         "default": "auto"}


@pytest.mark.parametrize(("context", "route"), [
    ({"amount": 5000, "vip": False}, "manager"),  # first match wins though the second holds too
    ({"amount": 500, "vip": False}, "clerk"),
    ({"amount": 5, "vip": True}, "clerk"),
    ({"amount": 5, "vip": False}, "auto"),
])
def test_router_first_match_then_default(context: dict[str, Any], route: str) -> None:
    result = get_kind("router").run(make_call("router", RULES, context=context))
    assert result.output == {"route": route}


def test_router_reads_context_steps_and_input() -> None:
    config = {"rules": [{"when": "steps.classify.output.route == 'refund' and input.vip", "route": "fast"},
                        {"when": "context.tries >= 3", "route": "give_up"}]}
    call = make_call("router", config, context={"tries": 1},
                     steps={"classify": {"output": {"route": "refund"}}}, start_input={"vip": True})
    assert get_kind("router").run(call).output == {"route": "fast"}
    call = make_call("router", config, context={"tries": 3},
                     steps={"classify": {"output": {"route": "other"}}}, start_input={"vip": True})
    assert get_kind("router").run(call).output == {"route": "give_up"}


def test_router_without_match_or_default_fails_for_good() -> None:
    config = {"rules": [{"when": "amount > 100", "route": "big"}]}
    with pytest.raises(PermanentStepError, match="no rule matched and the router has no default route"):
        get_kind("router").run(make_call("router", config, context={"amount": 1}))


def test_router_rule_naming_a_missing_value_fails_for_good() -> None:
    config = {"rules": [{"when": "amount > 100", "route": "big"}], "default": "small"}
    with pytest.raises(PermanentStepError, match="rule condition failed: 'amount' is not defined"):
        get_kind("router").run(make_call("router", config, context={}))


# --- Wait ------------------------------------------------------------------------------------------

def test_wait_defers_until_due_then_completes() -> None:
    kind = get_kind("wait")
    activated = NOW
    due = activated + timedelta(seconds=90)
    early = kind.run(make_call("wait", {"seconds": 90}, activated_at=activated, now=activated + timedelta(seconds=10)))
    assert early.defer_until == due and early.output is None
    # Re-run late (a slow scheduler): still measured from activation, not from this run.
    late = kind.run(make_call("wait", {"seconds": 90}, activated_at=activated, now=due + timedelta(seconds=5)))
    assert late.defer_until is None
    assert late.output == {"waited_until": due.isoformat()}
    exact = kind.run(make_call("wait", {"seconds": 90}, activated_at=activated, now=due))
    assert exact.output == {"waited_until": due.isoformat()}


def test_wait_zero_seconds_completes_at_once() -> None:
    assert get_kind("wait").run(make_call("wait", {"seconds": 0})).output == {"waited_until": NOW.isoformat()}


def test_wait_until_an_absolute_time() -> None:
    kind = get_kind("wait")
    until = (NOW + timedelta(hours=1)).isoformat()
    assert kind.run(make_call("wait", {"until": until})).defer_until == NOW + timedelta(hours=1)
    done = kind.run(make_call("wait", {"until": until}, now=NOW + timedelta(hours=2)))
    assert done.output == {"waited_until": until}
    other_zone = kind.run(make_call("wait", {"until": "2025-01-01T13:30:00+02:00"}))
    assert other_zone.output == {"waited_until": "2025-01-01T13:30:00+02:00"}  # 11:30 UTC: past


@pytest.mark.parametrize(("until", "message"), [
    ("tomorrow", "until='tomorrow' is not an ISO 8601 time"),
    ("2025-01-01T13:00:00", "until must include a time zone offset"),
])
def test_wait_until_must_be_an_aware_iso_time(until: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        get_kind("wait").run(make_call("wait", {"until": until}))
    assert info.value.message == message
    assert info.value.permanent


# --- Python ----------------------------------------------------------------------------------------

CALLS: list[FunctionCall] = []


@register_function("tests.engine.record")
def _record(call: FunctionCall) -> dict[str, Any]:
    CALLS.append(call)
    return {"sum": sum(call.args.get("numbers", []))}


@register_function("tests.engine.remember")
def _remember(call: FunctionCall) -> FunctionResult:
    seen = list(call.context.get("seen") or []) + [call.args["item"]]
    return FunctionResult(output={"count": len(seen)}, context={"seen": seen})


@register_function("tests.engine.explode")
def _explode(call: FunctionCall) -> None:
    raise PermanentStepError("the function refused")


def test_python_calls_the_registered_function_with_everything_it_needs() -> None:
    CALLS.clear()
    call = make_call("python", {"function": "tests.engine.record", "args": {"numbers": [1, 2, 3]}},
                     node_id="adder", context={"c": 1}, steps={"prev": {"output": 1}}, start_input={"i": 2},
                     visit=3, attempt=2)
    result = get_kind("python").run(call)
    assert result.output == {"sum": 6}
    assert result.context_updates == {}
    (seen,) = CALLS
    assert (seen.node_id, seen.visit, seen.attempt, seen.instance_id) == ("adder", 3, 2, 7)
    assert seen.idempotency_key == "7:adder:3"
    assert (seen.context, seen.steps, seen.start_input) == ({"c": 1}, {"prev": {"output": 1}}, {"i": 2})


def test_python_function_result_updates_the_context() -> None:
    call = make_call("python", {"function": "tests.engine.remember", "args": {"item": "b"}}, context={"seen": ["a"]})
    result = get_kind("python").run(call)
    assert result.output == {"count": 2}
    assert result.context_updates == {"seen": ["a", "b"]}
    assert call.context == {"seen": ["a"]}  # the function returned an update; it did not mutate


def test_python_function_errors_propagate() -> None:
    with pytest.raises(PermanentStepError, match="the function refused"):
        get_kind("python").run(make_call("python", {"function": "tests.engine.explode"}))


def test_python_unregistered_function_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="function 'tests.engine.gone' is not registered") as info:
        get_kind("python").run(make_call("python", {"function": "tests.engine.gone"}))
    assert info.value.permanent


def test_function_names_lists_the_registry() -> None:
    names = function_names()
    assert names == sorted(names)
    assert {"tests.engine.record", "noop", "examples.clean_sources"} <= set(names)


def test_example_functions_run() -> None:
    steps = {"think": {"output": {"tool_calls": [{"name": "orders", "args": {"id": 42}}]}}}
    result = get_kind("python").run(make_call("python", {"function": "examples.lookup_order"}, steps=steps))
    assert result.output == {"tool": "orders", "order": 42, "status": "shipping tomorrow"}
    assert result.context_updates == {"observations": [result.output]}
    masked = get_kind("python").run(make_call("python", {"function": "examples.sensitive_word_filter"},
                                              steps={"answer": {"output": {"text": "Your Password is x"}}}))
    assert masked.output == {"text": "Your ******** is x", "masked": True}
