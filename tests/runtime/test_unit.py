"""The unit of work: status changes go through the one transition table, wherever they happen."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workflows.engine.graph import Graph
from workflows.engine.statuses import IllegalTransition
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import UnitOfWork

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def unit(status: str = "running") -> UnitOfWork:
    graph = Graph.from_json({"nodes": [{"id": "start", "type": "start"}, {"id": "end", "type": "end"}],
                             "edges": [{"source": "start", "target": "end"}]})
    return UnitOfWork(WorkflowInstance(pk=1, status=status, event_seq=4, state={}), graph, NOW)


def test_an_illegal_step_transition_is_refused_where_it_is_decided():
    uow = unit()
    done = StepRun(pk=7, status="succeeded", lease_token="")
    with pytest.raises(IllegalTransition, match="step cannot go from 'succeeded' to 'running'"):
        uow.update_step(done, status="running")
    assert done.status == "succeeded" and not uow.changes


def test_a_human_task_answered_goes_from_pending_to_succeeded():
    uow = unit("waiting")
    task = StepRun(pk=8, status="pending", lease_token="")
    uow.update_step(task, status="succeeded", output={"approved": True})
    change = uow.changes[id(task)]
    assert change.expect_status == "pending" and change.fields["status"] == "succeeded"


def test_an_illegal_instance_transition_is_refused():
    uow = unit("completed")
    with pytest.raises(IllegalTransition):
        uow.set_instance(status="halted")


def test_changes_to_one_step_merge_and_stay_conditional_on_the_first_status():
    uow = unit()
    step = StepRun(pk=9, status="running", lease_token="t1")
    uow.update_step(step, error={"message": "x"})
    uow.update_step(step, status="pending", lease_token="")
    change = uow.changes[id(step)]
    assert (change.expect_status, change.expect_token) == ("running", "t1")
    assert change.fields == {"error": {"message": "x"}, "status": "pending", "lease_token": ""}


def test_events_are_numbered_from_the_instance_sequence():
    uow = unit()
    uow.event("a")
    uow.event("b")
    assert [e.seq for e in uow.events] == [5, 6] and uow.instance.event_seq == 6 and uow.loaded_seq == 4
