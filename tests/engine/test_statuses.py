"""The instance and step transition tables."""

from __future__ import annotations

import pytest

from workflows.engine.statuses import (
    INSTANCE_ACTIVE,
    INSTANCE_FINAL,
    INSTANCE_TRANSITIONS,
    STEP_OPEN,
    STEP_TRANSITIONS,
    IllegalTransition,
    InstanceStatus,
    StepStatus,
    check_instance_transition,
    check_step_transition,
)

I, S = InstanceStatus, StepStatus  # noqa: E741 - short names keep the tables readable


def test_every_status_has_a_row_and_every_target_is_a_status() -> None:
    assert set(INSTANCE_TRANSITIONS) == set(I)
    assert set(STEP_TRANSITIONS) == set(S)
    for table, statuses in ((INSTANCE_TRANSITIONS, set(I)), (STEP_TRANSITIONS, set(S))):
        for current, targets in table.items():
            assert targets <= statuses, current
            assert current not in targets, f"{current} -> itself is not a transition"


def test_terminal_statuses_have_no_way_out() -> None:
    assert INSTANCE_TRANSITIONS[I.COMPENSATED] == frozenset()
    # Only an operator's rerun reopens them; a completed sub-workflow also compensates when its parent does.
    assert INSTANCE_TRANSITIONS[I.CANCELLED] == {I.RUNNING}
    assert INSTANCE_TRANSITIONS[I.COMPLETED] == {I.RUNNING, I.COMPENSATING}
    for status in (S.SKIPPED, S.CANCELLED, S.COMPENSATED):
        assert STEP_TRANSITIONS[status] == frozenset()


def test_final_instance_statuses_lead_only_to_compensation_or_an_operators_rerun() -> None:
    # Failed is final for the run; the saga may still compensate it, and an operator may run a
    # stopped instance again (retry a failed step, rerun from a node). Compensated is the end.
    assert INSTANCE_FINAL == {I.COMPLETED, I.FAILED, I.CANCELLED, I.COMPENSATED}
    leaving = set().union(*(INSTANCE_TRANSITIONS[s] for s in INSTANCE_FINAL))
    assert leaving == {I.COMPENSATING, I.RUNNING}
    assert INSTANCE_TRANSITIONS[I.COMPENSATED] == frozenset()
    assert INSTANCE_TRANSITIONS[I.COMPLETED] == {I.RUNNING, I.COMPENSATING}  # a sub-workflow's compensation
    assert INSTANCE_ACTIVE.isdisjoint(INSTANCE_FINAL)
    assert I.HALTED not in INSTANCE_FINAL and I.HALTED not in INSTANCE_ACTIVE


@pytest.mark.parametrize(("current", "target"), [
    (I.PENDING, I.RUNNING), (I.RUNNING, I.WAITING), (I.WAITING, I.RUNNING), (I.RUNNING, I.COMPLETED),
    (I.RUNNING, I.HALTED), (I.HALTED, I.RUNNING), (I.HALTED, I.FAILED), (I.FAILED, I.COMPENSATING),
    (I.COMPENSATING, I.COMPENSATED), (I.COMPENSATING, I.HALTED), (I.WAITING, I.CANCELLED),
    (I.PENDING, I.CANCELLED), (I.WAITING, I.HALTED),
])
def test_legal_instance_transitions(current: str, target: str) -> None:
    check_instance_transition(current, target)


@pytest.mark.parametrize(("current", "target"), [
    (I.COMPLETED, I.WAITING), (I.PENDING, I.COMPLETED), (I.CANCELLED, I.HALTED), (I.FAILED, I.COMPLETED),
    (I.COMPENSATED, I.COMPENSATING), (I.COMPENSATED, I.RUNNING), (I.PENDING, I.HALTED), (I.RUNNING, I.COMPENSATING),
    (I.HALTED, I.COMPLETED), (I.RUNNING, I.PENDING),
])
def test_illegal_instance_transitions(current: str, target: str) -> None:
    with pytest.raises(IllegalTransition) as info:
        check_instance_transition(current, target)
    assert str(info.value) == f"instance cannot go from {str(current)!r} to {str(target)!r}"
    assert (info.value.current, info.value.target) == (current, target)


@pytest.mark.parametrize(("current", "target"), [
    (S.PENDING, S.QUEUED), (S.QUEUED, S.RUNNING), (S.RUNNING, S.SUCCEEDED), (S.RUNNING, S.FAILED),
    (S.RUNNING, S.RETRYING), (S.RETRYING, S.QUEUED), (S.SUCCEEDED, S.COMPENSATED), (S.FAILED, S.QUEUED),
    (S.PENDING, S.SKIPPED), (S.RUNNING, S.QUEUED), (S.QUEUED, S.CANCELLED),
])
def test_legal_step_transitions(current: str, target: str) -> None:
    check_step_transition(current, target)


@pytest.mark.parametrize(("current", "target"), [
    (S.SUCCEEDED, S.RUNNING), (S.QUEUED, S.SUCCEEDED), (S.PENDING, S.RUNNING), (S.SKIPPED, S.QUEUED),
    (S.COMPENSATED, S.SUCCEEDED), (S.CANCELLED, S.QUEUED), (S.FAILED, S.SUCCEEDED), (S.RETRYING, S.RUNNING),
])
def test_illegal_step_transitions(current: str, target: str) -> None:
    with pytest.raises(IllegalTransition, match=f"step cannot go from '{current}' to '{target}'"):
        check_step_transition(current, target)


def test_open_steps_are_exactly_those_that_can_still_finish() -> None:
    assert STEP_OPEN == {S.PENDING, S.QUEUED, S.RUNNING, S.RETRYING}
    for status in STEP_OPEN:
        reachable = set(STEP_TRANSITIONS[status])
        frontier = list(reachable)
        while frontier:
            for nxt in STEP_TRANSITIONS[frontier.pop()]:
                if nxt not in reachable:
                    reachable.add(nxt)
                    frontier.append(nxt)
        assert reachable & {S.SUCCEEDED, S.FAILED, S.CANCELLED}, status
