"""A step that kills its worker on every attempt is stopped after its attempts: the instance halts
into review (poison_step) instead of cycling forever, and the workers stay up."""

from __future__ import annotations

import pytest

import tests.workflows.poison_functions  # noqa: F401 - registers the function for validation here
from tests.conftest import chain, wait_for_status
from workflows import runtime
from workflows.models import ReviewItem


@pytest.mark.django_db(transaction=True)
def test_poison_step_halts_after_its_attempts(processes, make_version):
    version = make_version(chain({"id": "boom", "type": "python", "config": {"function": "tests.kill_worker"},
                                  "retry": {"max_attempts": 2, "backoff_s": 0.1}}))
    env = {"STEADYFLOW_EXTRA_FUNCTIONS": "tests.workflows.poison_functions", "STEADYFLOW_LEASE_S": "2",
           "STEADYFLOW_SCHEDULER_INTERVAL_S": "0.2"}
    worker = processes.start("run_worker", "default", "--fork", env=env)
    processes.scheduler(env=env)
    instance = runtime.start_instance(version, {})
    wait_for_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "poison_step"
    step = instance.steps.get(node_id="boom")
    assert step.attempt == 2 and step.status == "pending"  # parked for an operator
    assert step.error["code"] == "step_error" or "lease" in step.error["message"]
    item = ReviewItem.objects.get(instance=instance, status="open")
    assert item.reason == "poison_step" and item.details["attempts"] == 2
    assert worker.poll() is None  # the forking worker lost only its work horses
    types = list(instance.events.values_list("type", flat=True))
    assert types.count("step_started") == 2 and "step_retrying" in types


@pytest.mark.django_db(transaction=True)
def test_one_lost_worker_is_retried_even_with_a_single_attempt(processes, make_version, tmp_path):
    """Any process may die: with the default of one attempt, a crash is not the step's failure."""
    version = make_version(chain({"id": "flaky", "type": "python", "config": {
        "function": "tests.kill_worker_once", "args": {"marker": str(tmp_path / "crashed")}}}))
    env = {"STEADYFLOW_EXTRA_FUNCTIONS": "tests.workflows.poison_functions", "STEADYFLOW_LEASE_S": "2",
           "STEADYFLOW_SCHEDULER_INTERVAL_S": "0.2"}
    processes.start("run_worker", "default", "--fork", env=env)
    processes.scheduler(env=env)
    instance = runtime.start_instance(version, {})
    wait_for_status(instance, "completed", timeout=60)
    step = instance.steps.get(node_id="flaky")
    assert step.attempt == 2 and step.output == {"attempt": 2}
