"""Sub-workflows in the runtime, driven in this process (dispatch captured) on both stores: the child's
idempotent start, the race of a child that ends before its parent step parks, the reconciler's
backstop for a lost settle, and the save-time refusal of a self-reference."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.errors import GraphInvalid
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import effects
from workflows.scheduler import reconciler

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.parametrize("store", ["orm", "sql"])]


def parent_and_child(store: str, settings: Any, child_graph: dict[str, Any] | None = None) -> WorkflowInstance:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    save_version("kid", child_graph or chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}}))
    version = save_version("mom", chain({"id": "sub", "type": "subworkflow",
                                         "config": {"workflow": "kid", "input": {"n": "{{ context.n }}"}}}))
    return runtime.start_instance(version, {"n": 1})


def claim_sub(parent: WorkflowInstance) -> runtime.Claim:
    step = StepRun.objects.get(instance=parent, node_id="sub")
    claim = runtime.claim_step(step.pk, "w1")
    assert claim is not None
    return claim


def run_handler(claim: runtime.Claim) -> Any:
    return claim.kind.run(runtime.build_call(claim))


def test_a_replayed_step_finds_its_child_instead_of_starting_another(store, settings, enqueued):
    parent = parent_and_child(store, settings)
    claim = claim_sub(parent)
    first = run_handler(claim)
    again = run_handler(claim)  # the same attempt replayed (a worker that died before committing)
    assert first.waiting_on == again.waiting_on
    [child] = WorkflowInstance.objects.filter(parent_step=claim.step)
    assert child.pk == first.waiting_on and child.input == {"n": 1} and child.state["depth"] == 1
    assert child.idempotency_key == f"subflow:{parent.pk}:sub:1:1"
    # Even a start that missed the link (a race past the lookup) returns the first child by its key.
    version = child.version
    assert runtime.start_instance(version, {"n": 1}, idempotency_key=child.idempotency_key).pk == child.pk

    runtime.finish_step(claim, runtime.Outcome(result=first))
    step = StepRun.objects.get(pk=claim.step.pk)
    assert (step.status, step.due_at, step.lease_token, step.attempt) == ("pending", None, "", 1)
    assert step.input == {"workflow": "kid", "input": {"n": 1}}
    parent.refresh_from_db()
    assert parent.status == "waiting" and parent.open_steps == 1


def test_a_child_that_ends_before_its_parent_step_parks_settles_it_at_once(store, settings, enqueued):
    parent = parent_and_child(store, settings)
    claim = claim_sub(parent)
    result = run_handler(claim)
    # The child is cancelled before the parent's outcome commits: its settle finds the step still
    # running and leaves it; the parent's commit reads the child under the lock and fails the step.
    assert runtime.cancel_instance(result.waiting_on)
    assert StepRun.objects.get(pk=claim.step.pk).status == "running"
    runtime.finish_step(claim, runtime.Outcome(result=result))
    parent.refresh_from_db()
    assert parent.status == "failed"
    step = StepRun.objects.get(pk=claim.step.pk)
    assert step.status == "failed" and step.error["code"] == "child_cancelled"


def test_the_reconciler_settles_a_step_whose_childs_end_was_not_passed_on(store, settings, enqueued,
                                                                             monkeypatch):
    parent = parent_and_child(store, settings)
    claim = claim_sub(parent)
    result = run_handler(claim)
    runtime.finish_step(claim, runtime.Outcome(result=result))
    # The process dies between the child's commit and its effect: here, the effect does nothing.
    monkeypatch.setitem(effects.actions, "child_ended", lambda child_id: None)
    child = WorkflowInstance.objects.get(pk=result.waiting_on)
    from django.contrib.auth.models import User

    from workflows.models import ReviewItem
    from workflows.operators.review import Decision, decide

    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    decide(ReviewItem.objects.get(instance=child, status="open").pk, boss, Decision(action="approve"))
    child.refresh_from_db()
    assert child.status == "completed"
    step = StepRun.objects.get(pk=claim.step.pk)
    assert step.status == "pending"

    report = reconciler.tick()
    assert report.subflows == 1
    step.refresh_from_db()
    assert step.status == "queued" and step.pk in [pk for pk, _ in enqueued]
    runtime.run_step(step.pk, "w2")
    parent.refresh_from_db()
    assert parent.status == "completed"
    step.refresh_from_db()
    assert step.attempt == 1 and step.output == child.context
    assert reconciler.tick().subflows == 0  # nothing left to do


def test_a_child_orphaned_by_a_lost_cancel_is_cancelled_by_the_reconciler(store, settings, enqueued, monkeypatch):
    parent = parent_and_child(store, settings)
    claim = claim_sub(parent)
    result = run_handler(claim)
    runtime.finish_step(claim, runtime.Outcome(result=result))
    monkeypatch.setitem(effects.actions, "cancel_children", lambda step_ids, now=None: 0)
    assert runtime.cancel_instance(parent.pk)
    child = WorkflowInstance.objects.get(pk=result.waiting_on)
    assert child.status == "waiting"
    monkeypatch.undo()
    assert reconciler.tick().subflows == 1
    child.refresh_from_db()
    assert child.status == "cancelled"


def test_a_refused_input_or_an_unknown_workflow_fails_the_step_for_good_naming_it(store, settings, enqueued):
    from workflows.engine.errors import PermanentStepError

    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    save_version("strict", {**chain(py("a", "tests.echo")), "input": {
        "type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}})
    for slug, message in (("strict", "sub-workflow 'strict' refused its input: input.amount: must be a number"),
                          ("ghost", "sub-workflow 'ghost' does not exist")):
        version = save_version(f"calls-{slug}", chain({"id": "sub", "type": "subworkflow", "config": {
            "workflow": slug, "input": {"amount": "lots"}}}))
        parent = runtime.start_instance(version, {})
        claim = claim_sub(parent)
        with pytest.raises(PermanentStepError) as caught:
            run_handler(claim)
        assert str(caught.value).startswith(message)
        assert not WorkflowInstance.objects.filter(parent_step=claim.step).exists()


def halt(instance: WorkflowInstance) -> int:
    from workflows.models import ReviewItem
    from workflows.runtime import stopping

    with transaction.atomic():
        inst = runtime.lock(instance.pk)
        uow = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), timezone.now())
        stopping.halt(uow, "loop_breaker", {"message": "halted by the test"})
        runtime.apply(uow)
    return ReviewItem.objects.get(instance=instance, status="open").pk


def test_a_halt_parks_a_queued_step_and_a_waiting_one_and_resuming_carries_both_on(store, settings, enqueued):
    from django.contrib.auth.models import User

    from workflows.models import ReviewItem
    from workflows.operators.review import Decision, decide

    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    parent = parent_and_child(store, settings)
    step = StepRun.objects.get(instance=parent, node_id="sub")
    # Halted before its step ran: parked like any queued step, and queued again on resume.
    decide(halt(parent), boss, Decision(action="approve"))
    step.refresh_from_db()
    assert step.status == "queued" and enqueued.count((step.pk, "default")) == 2
    claim = claim_sub(parent)
    runtime.finish_step(claim, runtime.Outcome(result=run_handler(claim)))
    child = WorkflowInstance.objects.get(parent_step=step)
    # Halted while it waits: the step keeps waiting for its child; the child's end waits for the resume.
    item = halt(parent)
    decide(ReviewItem.objects.get(instance=child, status="open").pk, boss, Decision(action="approve"))
    child.refresh_from_db()
    step.refresh_from_db()
    assert child.status == "completed" and step.status == "pending"
    decide(item, boss, Decision(action="approve"))
    step.refresh_from_db()
    parent.refresh_from_db()
    assert step.status == "queued" and parent.status == "running"
    runtime.run_step(step.pk, "w2")
    parent.refresh_from_db()
    assert parent.status == "completed" and parent.context == {"n": 1}


def test_a_graph_that_starts_its_own_workflow_is_refused_at_save_naming_the_node(store, settings):
    with pytest.raises(GraphInvalid) as caught:
        save_version("loop", chain({"id": "again", "type": "subworkflow", "config": {"workflow": "loop"}},
                                   py("a", "tests.echo")))
    assert [i.as_dict() for i in caught.value.issues] == [{
        "message": "node 'again': a sub-workflow may not start its own workflow 'loop'", "node": "again",
        "field": "config.workflow"}]


def test_a_plan_bounded_below_its_shortest_run_is_not_refused_its_child_halts_for_review(store, settings, enqueued):
    """A planned child gets no more transitions than its parent has left (here 1, for a plan whose
    shortest run is 4): that bound is not a designer's setting, so the plan is not refused at
    validation; the child halts into review, where an operator can grant more."""
    import json

    from workflows.models import ReviewItem

    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    plan = chain(py("a", "tests.echo"), py("b", "tests.echo"))
    version = save_version("planning", chain(
        {"id": "plan", "type": "planner", "config": {"objective": "o", "provider": "scripted",
                                                     "script": [{"text": json.dumps(plan)}]}},
        settings={"max_transitions": 3}))
    parent = runtime.start_instance(version, {})
    step = StepRun.objects.get(instance=parent, node_id="plan")
    claim = runtime.claim_step(step.pk, "w1")
    assert claim is not None
    result = run_handler(claim)
    child = WorkflowInstance.objects.get(pk=result.waiting_on)
    assert child.version.graph["settings"]["max_transitions"] == 1
    assert child.status == "halted" and child.halt_reason == "loop_breaker"
    assert ReviewItem.objects.filter(instance=child, status="open", reason="loop_breaker").exists()
