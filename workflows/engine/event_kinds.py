"""The event kinds the runtime writes to an instance's log, and what each says about the state.

The live instance page rebuilds its picture from the event log alone (static/js/live/reducer.js): an
event about a step moves that node to a step status, an event about the instance moves the instance to
an instance status. These tables are that mapping; the page gets them from the server (dashboard/pages/meta.py,
`GET /api/meta`) instead of keeping a copy. Plain Python like the rest of the engine.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.statuses import INSTANCE_FINAL, InstanceStatus, StepStatus

# A compensation step runs under its node's id with this prefix (workflows/runtime/compensation.py).
COMPENSATE_PREFIX = "compensate:"

_S = StepStatus
# Node state after an event about one of its steps. A human task waits (step_waiting) and a step
# parked by a halt (step_parked) show as pending: nothing runs until someone acts.
NODE_STATE_BY_EVENT: dict[str, str] = {
    "step_queued": _S.QUEUED, "step_started": _S.RUNNING, "step_succeeded": _S.SUCCEEDED,
    "step_retrying": _S.RETRYING, "step_failed": _S.FAILED, "step_waiting": _S.PENDING,
    "step_pending": _S.PENDING, "step_parked": _S.PENDING, "step_cancelled": _S.CANCELLED,
    "node_skipped": _S.SKIPPED, "step_compensated": _S.COMPENSATED,
}

_I = InstanceStatus
# Instance status after an event about the instance (a payload's own `status` wins when present).
INSTANCE_STATUS_BY_EVENT: dict[str, str] = {
    "instance_started": _I.RUNNING, "instance_completed": _I.COMPLETED, "instance_failed": _I.FAILED,
    "instance_cancelled": _I.CANCELLED, "instance_halted": _I.HALTED, "instance_resumed": _I.RUNNING,
    "instance_retried": _I.RUNNING, "instance_rerun": _I.RUNNING, "compensation_started": _I.COMPENSATING,
    "instance_compensated": _I.COMPENSATED,
}

# Every kind the runtime writes; the ones above plus those that change no status.
EVENT_KINDS: tuple[str, ...] = tuple(sorted({
    *NODE_STATE_BY_EVENT, *INSTANCE_STATUS_BY_EVENT,
    "edges_taken", "review_decided", "human_task_opened", "compensation_succeeded", "checkpoint_corrupt",
    "instance_restored",
}))


def tables() -> dict[str, Any]:
    """The tables as JSON-ready data (what `GET /api/meta` serves under `events` and `statuses`)."""
    return {
        "eventKinds": list(EVENT_KINDS),
        "nodeStateByEvent": {k: str(v) for k, v in NODE_STATE_BY_EVENT.items()},
        "instanceStatusByEvent": {k: str(v) for k, v in INSTANCE_STATUS_BY_EVENT.items()},
        "compensatePrefix": COMPENSATE_PREFIX,
        "instanceStatuses": [str(s) for s in InstanceStatus],
        "stepStatuses": [str(s) for s in StepStatus],
        "instanceFinal": sorted(str(s) for s in INSTANCE_FINAL),
    }


if __name__ == "__main__":  # the JavaScript unit tests read the real tables this way (tests/js/)
    import json

    print(json.dumps(tables()))
