"""Sub-workflows on real workers: the parent step waits with no worker held, resumes with the child's
output, and failure, cancellation, halts, crashes, depth and compensation propagate."""

from __future__ import annotations

import itertools
import os
import signal
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain, halts_as_it_starts, wait_for, wait_for_status
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV, calls_so_far
from tests.workflows.support import assert_history_consistent, expect_status, py, steps
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.operators.review import Decision, decide

pytestmark = pytest.mark.django_db(transaction=True)
_slugs = itertools.count(1)


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    worker_env.update(EXTRA_FUNCTIONS_ENV)
    return worker_env


@pytest.fixture
def operator(transactional_db, user_in):
    return user_in("operators", "olga")


def workflow(graph: dict[str, Any], prefix: str = "sub") -> str:
    slug = f"{prefix}-{next(_slugs)}"
    save_version(slug, graph)
    return slug


def sub(node_id: str, slug: str, **config: Any) -> dict[str, Any]:
    extra = {key: config.pop(key) for key in ("retry", "compensate") if key in config}
    return {"id": node_id, "type": "subworkflow", "config": {"workflow": slug, **config}, **extra}


def human(node_id: str = "ask") -> dict[str, Any]:
    return {"id": node_id, "type": "human", "config": {"prompt": "Go on?"}}


def start(slug: str, start_input: dict[str, Any] | None = None) -> WorkflowInstance:
    from workflows.models import WorkflowDefinition

    version = WorkflowDefinition.objects.get(slug=slug).latest_version()
    return runtime.start_instance(version, start_input or {})


def child_of(parent: WorkflowInstance, node: str = "sub", count: int = 1) -> WorkflowInstance:
    wait_for(lambda: WorkflowInstance.objects.filter(parent_step__instance=parent, parent_step__node_id=node)
             .count() >= count, message=f"child {count} of {node}")
    return WorkflowInstance.objects.filter(parent_step__instance=parent, parent_step__node_id=node).order_by("id")[
        count - 1]


def open_task(instance: WorkflowInstance) -> ReviewItem:
    return wait_for(lambda: ReviewItem.objects.filter(instance=instance, status="open").first(),
                    message=f"an open review item on {instance.pk}")


def test_parent_waits_without_a_worker_and_resumes_with_the_mapped_output(processes, redis_conn, operator):
    import django_rq
    from rq.registry import StartedJobRegistry

    child_slug = workflow(chain(human(), py("answer", "tests.echo", args={"set": {"answer": "A: {{ context.q }}"}}),
                                settings={"budget_usd": 1}))
    parent_slug = workflow(chain(
        sub("sub", child_slug, input={"q": "{{ context.question }}"}, output={"answer": "{{ child.output.answer }}"},
            save_as="reply"),
        py("after", "tests.echo", args={"got": "{{ context.reply.answer }}"})))
    parent = start(parent_slug, {"question": "why?"})
    processes.worker("default")
    processes.scheduler()

    child = child_of(parent)
    task = open_task(child)
    wait_for(lambda: StepRun.objects.filter(instance=parent, node_id="sub", status="pending").exists(),
             message="the parent step parked")
    parent.refresh_from_db()
    assert parent.status == "waiting"
    step = StepRun.objects.get(instance=parent, node_id="sub")
    assert step.due_at is None and step.lease_token == "" and step.attempt == 1
    # No worker holds anything while the child waits for its person: nothing running, nothing queued.
    assert not StepRun.objects.filter(status__in=["running", "queued"]).exists()
    queue = django_rq.get_queue("default")
    assert queue.count == 0 and StartedJobRegistry(queue=queue).count == 0
    assert child.parent_step_id == step.pk and child.state["depth"] == 1
    assert child.idempotency_key == f"subflow:{parent.pk}:sub:1:1" and child.input == {"q": "why?"}
    assert parent.events.filter(type="step_waiting", node_id="sub", payload__child=child.pk).exists()

    decide(task.pk, operator, Decision(action="approve"))
    expect_status(parent, "completed")
    child.refresh_from_db()
    assert child.status == "completed"
    step.refresh_from_db()
    assert step.output == {"answer": "A: why?"} and step.attempt == 1
    assert step.usage["child"] == child.pk
    assert parent.context["reply"] == {"answer": "A: why?"}
    assert StepRun.objects.get(instance=parent, node_id="after").output["got"] == "A: why?"
    assert_history_consistent(parent)
    assert_history_consistent(child)


def test_child_failure_fails_the_step_and_a_retry_starts_a_new_child(processes, redis_conn):
    child_slug = workflow(chain(py("flaky", "tests.fail_counted",
                                   args={"counter": "{{ context.counter }}", "failures": 1})))
    retried = workflow(chain(sub("sub", child_slug, input={"counter": "{{ context.counter }}"},
                                 retry={"max_attempts": 2, "backoff_s": 0})))
    once = workflow(chain(sub("sub", child_slug, input={"counter": "{{ context.counter }}"})))
    first = start(retried, {"counter": "retried"})
    second = start(once, {"counter": "once"})
    processes.worker("default")
    processes.scheduler()

    expect_status(first, "completed")
    children = list(WorkflowInstance.objects.filter(parent_step__instance=first).order_by("id"))
    assert [c.status for c in children] == ["failed", "completed"]
    assert [c.idempotency_key for c in children] == [f"subflow:{first.pk}:sub:1:1", f"subflow:{first.pk}:sub:1:2"]
    assert first.events.filter(type="step_retrying", node_id="sub", payload__error__child=children[0].pk).exists()
    assert calls_so_far("retried") == 2

    expect_status(second, "failed")
    [failed_child] = WorkflowInstance.objects.filter(parent_step__instance=second)
    step = StepRun.objects.get(instance=second, node_id="sub")
    assert step.status == "failed" and step.error["child"] == failed_child.pk
    assert f"sub-workflow instance {failed_child.pk} failed" in second.error["message"]
    assert_history_consistent(first)
    assert_history_consistent(second)


def test_cancelling_the_parent_cancels_the_child_and_a_cancelled_child_fails_the_parent(processes, redis_conn):
    child_slug = workflow(chain(human()))
    parent_slug = workflow(chain(sub("sub", child_slug, retry={"max_attempts": 3})))
    cancelled_parent = start(parent_slug)
    other_parent = start(parent_slug)
    processes.worker("default")
    processes.scheduler()
    first_child = child_of(cancelled_parent)
    second_child = child_of(other_parent)
    for child in (first_child, second_child):
        open_task(child)

    assert runtime.cancel_instance(cancelled_parent.pk)
    expect_status(cancelled_parent, "cancelled")
    wait_for_status(first_child, "cancelled")
    assert first_child.error["message"] == "its parent step was cancelled"

    # A cancelled child fails its parent step for good, whatever the node's retry policy says.
    assert runtime.cancel_instance(second_child.pk)
    expect_status(other_parent, "failed")
    step = StepRun.objects.get(instance=other_parent, node_id="sub")
    assert step.status == "failed" and step.attempt == 1 and step.error["code"] == "child_cancelled"
    assert WorkflowInstance.objects.filter(parent_step__instance=other_parent).count() == 1


def test_a_child_halt_shows_on_the_parent_which_keeps_waiting(processes, redis_conn, operator, client):
    child_slug = workflow(halts_as_it_starts())
    parent_slug = workflow(chain(sub("sub", child_slug)))
    parent = start(parent_slug, {"order": []})
    processes.worker("default")
    processes.scheduler()
    child = child_of(parent)
    wait_for_status(child, "halted")
    item = ReviewItem.objects.get(instance=child, status="open")
    assert item.reason == "loop_breaker"
    # The child can halt before the parent's sub step has committed its wait (the child is started in
    # the step, the parent's `waiting` in the step's own commit): the parent settles in `waiting`, never
    # halts with its child.
    wait_for_status(parent, "waiting", timeout=15)

    client.force_login(operator)
    body = client.get(f"/api/instances/{parent.pk}/steps").json()
    [sub_step] = [s for s in body["steps"] if s["node"] == "sub"]
    assert sub_step["child"]["id"] == child.pk and sub_step["child"]["status"] == "halted"
    assert sub_step["child"]["url"] == f"/instances/{child.pk}/"
    assert sub_step["child"]["reviews"] == [{"id": item.pk, "reason": "loop_breaker", "url": f"/review/{item.pk}/"}]
    page = client.get(f"/instances/{child.pk}/").content.decode()
    assert f'href="/instances/{parent.pk}/"' in page and "started by" in page

    decide(item.pk, operator, Decision(action="approve", extra_transitions=5))
    expect_status(parent, "completed")
    assert child.__class__.objects.get(pk=child.pk).status == "completed"


def test_a_child_worker_killed_mid_step_and_the_parent_still_completes(processes, redis_conn):
    fast = {"STEADYFLOW_LEASE_S": "2", "STEADYFLOW_REDISPATCH_AFTER_S": "1"}
    child_slug = workflow(chain(py("slow", "tests.sleep", args={"seconds": 1.5}, queue="io")))
    parent_slug = workflow(chain(sub("sub", child_slug, output={"slept": "{{ child.id }}"})))
    parent = start(parent_slug)
    processes.worker("default", env=fast)
    victim = processes.worker("io", env=fast)
    processes.scheduler(env=fast)
    child = child_of(parent)
    wait_for(lambda: StepRun.objects.filter(instance=child, node_id="slow", status="running").exists(),
             message="the child's step running")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    processes.worker("io", env=fast)

    expect_status(parent, "completed", timeout=60)
    child.refresh_from_db()
    assert child.status == "completed"
    slow = StepRun.objects.get(instance=child, node_id="slow")
    assert slow.attempt == 2
    assert child.events.filter(type="step_retrying", payload__error__code="lease_expired").count() == 1
    assert StepRun.objects.get(instance=parent, node_id="sub").output == {"slept": child.pk}
    assert WorkflowInstance.objects.filter(parent_step__instance=parent).count() == 1
    assert_history_consistent(parent)
    assert_history_consistent(child)


def test_depth_limit_fails_the_deepest_start_with_the_depth_named(processes, redis_conn):
    leaf = workflow(chain(py("leaf", "tests.echo", args={})))
    middle = workflow(chain(sub("sub", leaf, max_depth=1)))
    top = workflow(chain(sub("sub", middle)))
    parent = start(top)
    processes.worker("default")
    processes.scheduler()

    expect_status(parent, "failed")
    [child] = WorkflowInstance.objects.filter(parent_step__instance=parent)
    assert child.status == "failed" and child.state["depth"] == 1
    assert not WorkflowInstance.objects.filter(parent_step__instance=child).exists()
    error = StepRun.objects.get(instance=child, node_id="sub").error
    assert "2 levels deep, past max_depth 1" in error["message"]
    assert error["depth"] == 2 and error["max_depth"] == 1


def test_parent_compensation_compensates_the_completed_child(processes, redis_conn):
    child_slug = workflow(chain(py("reserve", "tests.echo", args={"held": 1}, compensate="tests.echo")))
    parent_slug = workflow(chain(sub("sub", child_slug),
                                 py("pay", "tests.fail_times", args={"failures": 5, "permanent": True})))
    parent = start(parent_slug)
    processes.worker("default")
    processes.scheduler()

    wait_for_status(parent, {"failed", "compensated"})
    child = child_of(parent)
    wait_for_status(child, "compensated")
    assert StepRun.objects.get(instance=child, node_id="reserve").status == "compensated"
    assert StepRun.objects.get(instance=child, node_id="compensate:reserve").status == "succeeded"
    types = [e.type for e in child.events.order_by("seq")]
    assert types.index("instance_completed") < types.index("compensation_started") < types.index(
        "instance_compensated")
    assert [s.node_id for s in steps(parent)][:2] == ["start", "sub"]
