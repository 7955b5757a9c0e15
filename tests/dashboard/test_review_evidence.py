"""A review item shows what it is about (dashboard/pages/review_evidence.py): a human task the output of the
step before it, a loop halt the LLM replies that drove the loop."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.conftest import chain
from workflows import runtime
from workflows.engine.statuses import StepStatus
from workflows.models import ReviewItem, StepRun, WorkflowDefinition, WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)

DRAFT = {"id": "draft", "type": "llm", "config": {
    "provider": "scripted", "prompt": "Draft a reply to {{ input.ticket }}",
    "script": [{"text": "Refund 20 EUR: the parcel arrived broken."}]}}
APPROVE = {"id": "approve", "type": "human", "config": {"prompt": "Send this reply?"}}


def run_queued(instance: WorkflowInstance) -> WorkflowInstance:
    for _ in range(100):
        step = StepRun.objects.filter(instance=instance, status=StepStatus.QUEUED).order_by("id").first()
        if step is None:
            break
        runtime.run_step(step.pk, "test-worker")
    instance.refresh_from_db()
    return instance


def page_for(item: ReviewItem, user_in: Any) -> str:
    client = Client()
    client.force_login(user_in("operators", "olga"))
    response = client.get(f"/review/{item.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_human_task_shows_the_output_of_the_step_before_it(make_version: Any, user_in: Any) -> None:
    version = make_version(chain(DRAFT, APPROVE))
    instance = run_queued(runtime.start_instance(version, {"ticket": "T-1"}))
    assert instance.status == "waiting", (instance.status, instance.error)
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    page = page_for(item, user_in)
    assert "What led here" in page and 'id="rv-evidence"' in page
    assert "Refund 20 EUR: the parcel arrived broken." in page and "<code>draft</code>" in page


def test_a_human_task_right_after_the_start_says_it_works_on_the_input(make_version: Any, user_in: Any) -> None:
    instance = runtime.start_instance(make_version(chain(APPROVE)), {"ticket": "T-2"})
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    assert "No step ran before this task" in page_for(item, user_in)


def test_a_loop_halt_shows_the_llm_replies_that_drove_it(user_in: Any) -> None:
    call_command("load_examples", stdout=open("/dev/null", "w"))
    version = WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version()
    instance = run_queued(runtime.start_instance(version, {"ticket": "T-7"}))
    assert instance.status == "halted", (instance.status, instance.error)
    item = ReviewItem.objects.get(instance=instance, status="open")
    assert item.reason == "loop_breaker"
    page = page_for(item, user_in)
    assert "The LLM replies that drove the loop" in page
    # The example's scripted replies are routes: each reply shows the route it chose, newest last.
    assert page.count('class="rv-evidence-step" data-node="node_a"') >= 2
    assert page.count('class="rv-evidence-step" data-node="node_b"') >= 2
    assert "→ route <code>node_b</code>" in page and "→ route <code>node_a</code>" in page
