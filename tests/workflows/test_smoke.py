"""The first end-to-end check: real worker processes run the example workflows."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.conftest import wait_for_status
from workflows import runtime
from workflows.models import WorkflowDefinition


@pytest.mark.django_db(transaction=True)
def test_react_agent_completes_on_real_workers(processes, worker_env):
    call_command("load_examples")
    processes.all_workers()
    version = WorkflowDefinition.objects.get(slug="react-agent").latest_version()
    instance = runtime.start_instance(version, {"question": "where is my order?"})
    wait_for_status(instance, "completed", timeout=60)
    assert instance.context["reply"] == "Your order ships tomorrow."
    assert instance.steps.filter(status="succeeded").count() == 8


@pytest.mark.django_db(transaction=True)
def test_hallucination_loop_halts_at_max_transitions(processes, worker_env):
    call_command("load_examples")
    processes.all_workers()
    version = WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version()
    instance = runtime.start_instance(version, {"ticket": "T-1"})
    wait_for_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "loop_breaker"
    assert instance.loop_count == 10
    assert instance.error["path"][-2:] == ["node_b", "node_a"]
    review = instance.reviews.get()
    assert review.reason == "loop_breaker" and review.status == "open"
