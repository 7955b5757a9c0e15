"""The run loop a synchronous worker gives one job: claim, run, commit, and carry on inline while
a single same-queue successor follows (each step still committed on its own)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from workflows import db_threads
from workflows.database_outage import CommitAbandoned, DatabaseOutage
from workflows.engine.statuses import StepStatus
from workflows.runtime.claiming import claim_step, claim_steps
from workflows.runtime.config import conf, node_for_step
from workflows.runtime.finishing import finish_groups, finish_step, finish_steps
from workflows.runtime.leases import keeper
from workflows.runtime.observe import current_step
from workflows.runtime.records import Claim, Outcome, as_step_error
from workflows.runtime.step_calls import build_call, timeout_for

log = logging.getLogger("steadyflow.runtime")
database_outage = DatabaseOutage(log, "worker")
T = TypeVar("T")


def run_step(step_id: int, worker: str, queue: str | None = None) -> int:
    """What a worker does with one job. Returns how many steps it ran."""
    claim = claiming(lambda: claim_step(step_id, worker), f"step {step_id}")
    ran = 0
    inline_allowed = conf("INLINE_CONTINUATION")
    try:
        while claim is not None:
            outcome = run_claimed(claim)
            ran += 1
            claim = finish_step_reconnecting(claim, outcome, allow_inline=inline_allowed)
    except CommitAbandoned:
        pass  # logged once per episode; the step's lease takes it back
    finally:
        current_step.set(None)
    return ran


def claim_step_quietly(step_id: int, worker: str) -> Claim | None:
    """claim_step, or None when the database fails the claim (logged once per episode; the step stays
    queued and the reconciler dispatches it again): for consumers that claim outside run_step."""
    return claiming(lambda: claim_step(step_id, worker), f"step {step_id}")


def claim_steps_quietly(step_ids: list[int], worker: str) -> list[Claim]:
    """claim_steps, or [] when the database fails the claim (as claim_step_quietly)."""
    return claiming(lambda: claim_steps(step_ids, worker), f"steps {', '.join(map(str, step_ids))}") or []


def run_steps(step_ids: list[int], worker: str) -> int:
    """A batch job: several queued steps of one instance (a fan-out's branches on one queue), run one
    after another and committed together under one instance lock. A step's failure or timeout is
    that step's outcome alone.

    Every step of the batch keeps its lease alive from the claim until the outcomes commit (the
    steps waiting for their turn as well as those run whose outcomes wait for the others): else the
    scheduler would take back a step still to run here, or one run here, while a long call runs."""
    claims = claiming(lambda: claim_steps(step_ids, worker), f"steps {', '.join(map(str, step_ids))}") or []
    ran = 0
    inline_allowed = conf("INLINE_CONTINUATION")
    try:
        while claims:
            with keeper.holding_all((claim.step.pk, claim.token) for claim in claims):
                outcomes = [run_claimed(claim) for claim in claims]
                ran += len(claims)
                claims = finish_steps_reconnecting(claims, outcomes, allow_inline=inline_allowed)
    except CommitAbandoned:
        pass  # logged once per episode; the steps' leases take them back
    finally:
        current_step.set(None)
    return ran


def finish_steps_reconnecting(claims: list[Claim], outcomes: list[Outcome], *,
                              allow_inline: bool = False) -> list[Claim]:
    if len(claims) == 1:
        successor = finish_step_reconnecting(claims[0], outcomes[0], allow_inline=allow_inline)
        return [successor] if successor is not None else []
    return _reconnecting(lambda: finish_steps(claims, outcomes, allow_inline=allow_inline),
                         f"steps {', '.join(str(c.step.pk) for c in claims)}")


def finish_groups_reconnecting(groups: list[tuple[list[Claim], list[Outcome]]], *,
                               allow_inline: bool = False) -> list[list[Claim]]:
    """finish_groups (one transaction for all); if the connection drops, each group again on its
    own (on a fresh connection, while the leases hold)."""
    from django.db import InterfaceError, OperationalError, connection

    try:
        return finish_groups(groups, allow_inline=allow_inline)
    except (OperationalError, InterfaceError) as exc:
        log.warning("a group commit of %d outcome(s) failed (%s); committing them one by one", len(groups), exc)
        connection.close()
        return [finish_steps_reconnecting(claims, outcomes, allow_inline=allow_inline) for claims, outcomes in groups]


def run_claimed(claim: Claim) -> Outcome:
    """Run a synchronous handler under its timeout, its lease kept alive by the process's keeper."""
    from workflows.runtime.timeouts import time_limit

    current_step.set(claim)  # log lines from here on name the step (until the next one or the job's end)
    try:
        # The config's templates render inside the step's time limit: they are part of its work.
        with keeper.holding(claim.step.pk, claim.token), time_limit(timeout_for(claim), f"step {claim.node.id}"):
            # An llm node runs on a loop of its own here: its database helpers run on this process's
            # helper thread, which keeps (and checks) one connection instead of leaving one per call.
            call = build_call(claim, offload=db_threads.helpers())
            result = claim.kind.run(call)
        return Outcome(result=result)
    except Exception as exc:  # noqa: BLE001 - a failing node must never take the worker down
        return Outcome(error=as_step_error(exc))


def finish_step_reconnecting(claim: Claim, outcome: Outcome, *, allow_inline: bool = False) -> Claim | None:
    """finish_step, tried again on a fresh connection while the lease holds when the database
    connection drops (a failover, a killed backend): the handler's work is not thrown away and run
    twice. Safe because of the lease token: if an earlier try did commit (its acknowledgement was
    lost), the next finds the step no longer ours and commits nothing."""
    failed: list[bool] = []

    def attempt() -> Claim | None:
        successor = finish_step(claim, outcome, allow_inline=allow_inline)
        if successor is None and failed and allow_inline:
            return _adopt_inline_successor(claim)
        return successor

    return _reconnecting(attempt, f"step {claim.step.pk}", failed)


def claiming(claim: Callable[[], T], what: str) -> T | None:
    """A claim, or None when the database fails it (away, or refusing writes): nothing was taken,
    the step is still queued in the database and the reconciler dispatches it again
    (REDISPATCH_AFTER_S). Logged once per episode, not as a failed job per step."""
    from django.db import InterfaceError, OperationalError, connection

    started = time.monotonic()
    try:
        taken = claim()
    except (OperationalError, InterfaceError) as exc:
        database_outage.failed(f"claiming {what}", exc, "queued steps are dispatched again by the reconciler")
        connection.close()
        return None
    database_outage.recovered(started)
    return taken


def _reconnecting(commit: Callable[[], T], what: str, failed: list[bool] | None = None) -> T:
    """Call `commit`, again on a fresh connection while the lease holds when the connection drops."""
    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + conf("LEASE_S") / 2
    delay = 0.1
    while True:
        started = time.monotonic()
        try:
            result = commit()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + delay > deadline:
                # Its outcome is dropped; its lease takes it back once the database accepts writes again.
                # Logged once per episode; the job that ran it ends without a traceback (run_step).
                database_outage.gave_up(what, conf("LEASE_S") / 2, exc)
                raise CommitAbandoned(f"{what}: the database refused its outcome for half a lease") from exc
            if failed is not None:
                failed.append(True)
            # Once per episode (a crash, a full disk), not once per step: database_outage.py.
            database_outage.failed(f"{what}: committing its outcome", exc, "retrying on a new connection")
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        database_outage.recovered(started)
        return result


def _adopt_inline_successor(claim: Claim) -> Claim | None:
    """A commit whose acknowledgement was lost may have landed, claiming a successor for this worker
    to run inline. Carry on with it rather than leave it running for nobody until its lease expires."""
    from workflows.engine.nodes import get_kind
    from workflows.models import StepRun, WorkflowInstance

    done = StepRun.objects.filter(pk=claim.step.pk, status=StepStatus.SUCCEEDED, lease_token=claim.token).first()
    if done is None or done.finished_at is None:
        return None
    # The successor was created in the same transaction: started (claimed) at the step's finish time.
    successor = (StepRun.objects.filter(instance_id=done.instance_id, status=StepStatus.RUNNING,
                                        worker=claim.worker, started_at=done.finished_at)
                 .exclude(pk=done.pk).first())
    if successor is None:
        return None
    log.warning("step %s: its outcome had committed; carrying on with step %s", done.pk, successor.pk)
    node = node_for_step(claim.graph, successor.node_id)
    return Claim(step=successor, instance=WorkflowInstance.objects.get(pk=done.instance_id), graph=claim.graph,
                 node=node, kind=get_kind(node.type), token=successor.lease_token, worker=claim.worker)
