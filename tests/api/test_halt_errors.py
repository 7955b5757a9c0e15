"""An instance an operator sends on (a halt approved in review, a failed step retried, a rerun) shows
no error any more: the halt's or failure's message stays in the event log and on the review item.

Steps run in this process through runtime.run_step (what a worker's job calls); decisions and
operations go through the v1 API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.api.conftest import Api
from workflows import runtime
from workflows.engine.errors import CircuitOpen, PermanentStepError
from workflows.engine.functions import FunctionCall, register_function
from workflows.models import StepRun, WorkflowInstance

TROUBLE: set[str] = set()  # "breaker" / "fail": what the halts.* functions do while named here


@register_function("halts.work")
def work(call: FunctionCall) -> dict[str, Any]:
    if "breaker" in TROUBLE:
        raise CircuitOpen("the provider's breaker is open", details={"breaker": "llm:test"})
    if "fail" in TROUBLE:
        raise PermanentStepError("told to fail")
    return {"visit": call.visit}


@pytest.fixture(autouse=True)
def _calm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from workflows.adapters.breakers import DatabaseBreaker

    # The llm node asks its breaker from a thread (another connection, locked out on SQLite): closed.
    monkeypatch.setattr(DatabaseBreaker, "allow", lambda self: True)
    monkeypatch.setattr(DatabaseBreaker, "record", lambda self, ok: None)
    TROUBLE.clear()
    yield
    TROUBLE.clear()


LLM = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "x", "script": [
    {"text": "ok", "usage": {"prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.3}}]}}
WORK = {"id": "work", "type": "python", "config": {"function": "halts.work"}}


def chain(*nodes: dict[str, Any], **settings: Any) -> dict[str, Any]:
    ids = ["start", *(n["id"] for n in nodes), "end"]
    return {"nodes": [{"id": "start", "type": "start"}, *nodes, {"id": "end", "type": "end"}],
            "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
            "settings": settings}


def looping() -> dict[str, Any]:
    graph = chain(WORK, max_transitions=4)
    graph["edges"].append({"source": "work", "target": "work", "when": "output.visit < 5"})
    graph["edges"][1]["when"] = "output.visit >= 5"
    return graph


def run_queued(instance: WorkflowInstance) -> WorkflowInstance:
    for _ in range(50):
        step = StepRun.objects.filter(instance=instance, status="queued").order_by("id").first()
        if step is None:
            break
        runtime.run_step(step.pk, "test-worker")
    instance.refresh_from_db()
    return instance


def expired(instance: WorkflowInstance) -> WorkflowInstance:
    assert runtime.expire_instance(instance.pk, now=timezone.now() + timedelta(hours=2))
    instance.refresh_from_db()
    return instance


# reason -> (graph, what brings the halt about after the start, the decision that sends it on)
HALTS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[WorkflowInstance], WorkflowInstance],
                       dict[str, Any]]] = {
    "budget_exceeded": (lambda: chain(LLM, {**LLM, "id": "ask2"}, budget_usd=0.2), run_queued,
                        {"action": "approve", "extra_budget_usd": "1.0"}),
    "budget_exceeded_tokens": (lambda: chain(LLM, {**LLM, "id": "ask2"}, budget_tokens=100), run_queued,
                               {"action": "approve", "extra_tokens": 1000}),
    "loop_breaker": (looping, run_queued, {"action": "approve"}),
    "ttl_expired": (lambda: chain(WORK, ttl_s=60), expired, {"action": "approve", "extra_ttl_s": 600}),
    "circuit_open": (lambda: chain(WORK), run_queued, {"action": "approve"}),
}


def decided(api: Api, instance: WorkflowInstance, decision: dict[str, Any]) -> dict[str, Any]:
    item = instance.reviews.get(status="open")
    response = api.post(f"reviews/{item.pk}/decide", {**decision, "note": "go on"})
    assert response.status_code == 200, response.content[:500]
    shown = api.get(f"instances/{instance.pk}").json()
    return shown


@pytest.mark.parametrize("kind", sorted(HALTS))
def test_an_approved_halt_leaves_no_error_on_the_instance(kind: str, as_role: Any, make_version: Any) -> None:
    graph, bring_about, decision = HALTS[kind]
    reason = kind.removesuffix("_tokens")
    if kind == "circuit_open":
        TROUBLE.add("breaker")
    instance = bring_about(runtime.start_instance(make_version(graph()), {}))
    assert (instance.status, instance.halt_reason) == ("halted", reason), instance.error
    message = instance.error["message"]
    api = as_role("operator")
    assert api.get(f"instances/{instance.pk}").json()["error"]["message"] == message

    TROUBLE.clear()
    shown = decided(api, instance, decision)
    assert (shown["status"], shown["reason"], shown["error"]) == ("running", None, None)
    instance = run_queued(instance)
    assert (instance.status, instance.halt_reason, instance.error) == ("completed", "", None)
    assert api.get(f"instances/{instance.pk}").json()["error"] is None

    # The halt's message is history: in the event log and on the decided review item.
    log = api.get(f"instances/{instance.pk}/events?limit=1000").json()["events"]
    halted = [e for e in log if e["type"] == "instance_halted"]
    assert [e["payload"]["details"]["message"] for e in halted] == [message]
    item = instance.reviews.get()
    assert (item.status, item.details["message"]) == ("approved", message)
    assert api.get(f"reviews/{item.pk}").json()["details"]["message"] == message


@pytest.mark.parametrize("operation", ["retry", "rerun"])
def test_a_failed_instance_sent_on_by_an_operator_shows_no_error(operation: str, as_role: Any,
                                                                 make_version: Any) -> None:
    TROUBLE.add("fail")
    instance = run_queued(runtime.start_instance(make_version(chain(WORK)), {}))
    assert instance.status == "failed"
    message = instance.error["message"]
    TROUBLE.clear()
    api = as_role("operator")
    body = {"node": "work"} if operation == "rerun" else {}
    response = api.post(f"instances/{instance.pk}/{operation}", body)
    assert response.status_code == 200, response.content[:500]
    shown = response.json()["instance"]
    assert (shown["status"], shown["reason"], shown["error"]) == ("running", None, None)
    instance = run_queued(instance)
    assert (instance.status, instance.error) == ("completed", None)
    failed = instance.events.get(type="instance_failed")
    assert failed.payload["error"]["message"] == message
