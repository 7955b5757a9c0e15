"""The runtime: decides every transition of an instance and has a store write it.

Public API (nothing outside this package imports a private name from it):

- starting: `start_instance`, `start_instances` (many in one transaction)
- a worker's step: `claim_step`, `build_call`, `run_claimed`, `finish_step`,
  `finish_step_reconnecting`, `release_step`, `run_step` (the whole loop for one job)
- from outside: `cancel_instance`, `expire_instance`, `reconcile_subflows` (the reconciler's
  sub-workflow pass), `child_kinds` (the node types that start sub-workflows)
- observability: `current_step` (the step this thread/task runs); commit observers in `observe`
- `add_commit_hook`: what a layer above acts on after each commit (the notifications; runtime/effects.py)
- for the editor's node trial and planning (workflows/authoring/): `engine_config`, `conf`,
  `check_payload`, `redacted_config`, `as_step_error`
- on a locked instance, for operators' actions (review.py, operations.py, recovery.py): `UnitOfWork`,
  `lock`, `apply`, `resume`, `activate`, `stop_instance`, `start_compensation`, `resolve`,
  `fired_edges`, `budget_exceeded`, `check_payload`
"""

from __future__ import annotations

from workflows.runtime.activation import activate, budget_exceeded, fired_edges, resolve
from workflows.runtime.claiming import claim_step, claim_steps
from workflows.runtime.compensation import start_compensation
from workflows.runtime.config import (
    COMPENSATE_PREFIX,
    check_payload,
    child_kinds,
    compensation_node,
    conf,
    engine_config,
    graph_for_version,
    node_for_step,
    queue_for,
)
from workflows.runtime.effects import add_hook as add_commit_hook
from workflows.runtime.finishing import finish_groups, finish_step, finish_steps, release_step
from workflows.runtime.instance_control import apply, cancel_instance, expire_instance, lock
from workflows.runtime.leases import keeper
from workflows.runtime.loop import (
    claim_step_quietly,
    claim_steps_quietly,
    finish_groups_reconnecting,
    finish_step_reconnecting,
    finish_steps_reconnecting,
    run_claimed,
    run_step,
    run_steps,
)
from workflows.runtime.observe import current_step
from workflows.runtime.records import Claim, Outcome, StepOutputs, as_step_error
from workflows.runtime.redaction import redacted_config
from workflows.runtime.resuming import resume
from workflows.runtime.starting import client_key, start_instance, start_instances
from workflows.runtime.step_calls import build_call, timeout_for
from workflows.runtime.stopping import stop_instance
from workflows.runtime.subflows import other_waiting as others_waiting
from workflows.runtime.subflows import reconcile as reconcile_subflows
from workflows.runtime.unit import UnitOfWork

__all__ = [
    "activate", "add_commit_hook", "apply", "as_step_error", "budget_exceeded", "build_call", "cancel_instance",
    "check_payload", "child_kinds",
    "Claim", "claim_step", "claim_step_quietly", "claim_steps", "claim_steps_quietly",
    "client_key", "COMPENSATE_PREFIX", "compensation_node", "conf",
    "current_step",
    "engine_config",
    "expire_instance", "finish_groups", "finish_groups_reconnecting", "finish_step", "finish_step_reconnecting",
    "finish_steps", "finish_steps_reconnecting", "fired_edges", "graph_for_version", "keeper", "lock",
    "node_for_step", "Outcome", "queue_for", "reconcile_subflows", "redacted_config", "release_step", "resolve",
    "resume",
    "run_claimed", "run_step", "run_steps", "start_compensation", "start_instance", "start_instances",
    "StepOutputs", "stop_instance", "timeout_for", "UnitOfWork", "others_waiting",
]
