"""A transition as a unit of work: what the runtime decided, for a store to write in one transaction.

The store's contract: the runtime records into it (runtime/unit.py adds its snapshot policy), a store
writes it (orm.py, sql.py) and the runtime then runs its post-commit effects (runtime/effects.py).

The runtime never writes instance, step, event or checkpoint rows itself. It loads the instance
(locked) through a store, decides, and records here:

- instance field changes (`set_instance`, every status change checked against the one table);
- new steps (their ids are known only once the store inserts them; events and jobs refer to the
  step objects, so they resolve at write time);
- step changes (`update_step`), each a conditional UPDATE guarded by the status the step had when
  the runtime read it, every status change checked against the step transition table;
- events, numbered from the instance's `event_seq`;
- review items to open, and whether open ones close;
- the context keys the transition set or removed (its state delta), and whether a full,
  checksummed snapshot of the state is due (runtime/snapshots.py decides: forced at halts, ends and
  compensation, else every N events or once the deltas since the last one outweigh it);
- post-commit effects: jobs to enqueue and sub-workflow effects (run by runtime/effects.py).

`Store.apply(unit)` writes it; the runtime's effects run only after COMMIT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workflows.engine import deltas
from workflows.engine.deltas import json_size, to_json
from workflows.engine.graph import Graph
from workflows.engine.priorities import queue_name
from workflows.engine.statuses import check_instance_transition, check_step_transition
from workflows.models import ReviewItem, StepRun, WorkflowInstance


@dataclass
class PendingEvent:
    seq: int
    type: str
    node_id: str
    step: StepRun | None
    payload: dict[str, Any]
    review: ReviewItem | None = None  # its id goes into the payload as "review" once inserted


@dataclass
class StepChange:
    step: StepRun
    fields: dict[str, Any]
    # The status and lease token the runtime decided on: the UPDATE is conditional on both.
    expect_status: str
    expect_token: str


@dataclass
class UnitOfWork:
    instance: WorkflowInstance
    graph: Graph
    now: datetime
    events: list[PendingEvent] = field(default_factory=list)
    new_steps: list[StepRun] = field(default_factory=list)
    changes: dict[int, StepChange] = field(default_factory=dict)  # by id() of the step object
    new_reviews: list[ReviewItem] = field(default_factory=list)
    close_reviews: bool = False
    instance_fields: set[str] = field(default_factory=lambda: {"event_seq", "updated_at"})
    enqueue: list[StepRun] = field(default_factory=list)
    # A full snapshot of the state: True forces one, False forbids one (a claim), None lets the
    # policy decide at write time (snapshots.due).
    checkpoint: bool | None = None
    # The snapshot copies every value instead of referring to the deltas that hold the large ones
    # (store/snapshot_refs.py): a recovery's, rebuilt around damaged rows.
    snapshot_inline: bool = False
    # The state delta: context keys set (their new values) and removed by this transition.
    context_set: dict[str, Any] = field(default_factory=dict)
    context_unset: set[str] = field(default_factory=set)
    context_changed: bool = False
    tracked: dict[int, StepRun] = field(default_factory=dict)
    # JSON text already made for a value (by the payload size check), by id() of the value: a
    # store writes it instead of serialising the value again.
    known_json: dict[int, tuple[Any, str]] = field(default_factory=dict)
    # The event_seq the instance had when the runtime read it: a store may write the unit without
    # holding the lock while it decided, guarded by this (every transition moves the sequence).
    loaded_seq: int = -1
    # Post-commit effects besides jobs and the live notice (sub-workflows: settle a parent, cancel
    # or compensate children), each (name, args): the runtime runs the action registered under the
    # name after COMMIT (runtime/effects.py), failures logged.
    effects: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    # Decided on something outside this instance (a child's status): write it only under the
    # instance lock, never on the unlocked fast path (store/postgres.py).
    needs_lock: bool = False

    loaded_status: str = ""

    def __post_init__(self) -> None:
        if self.loaded_seq < 0:
            self.loaded_seq = self.instance.event_seq
        self.loaded_status = str(self.instance.status)

    # --- Recording ------------------------------------------------------------------------------

    def event(self, type_: str, node_id: str = "", step: StepRun | None = None,
              review: ReviewItem | None = None, **payload: Any) -> None:
        self.instance.event_seq += 1
        self.events.append(PendingEvent(self.instance.event_seq, type_, node_id, step, payload, review))

    def succeeded_event(self, step: StepRun) -> PendingEvent | None:
        """This unit's step_succeeded event of `step`, if it recorded one."""
        for event in reversed(self.events):
            if event.step is step and event.type == "step_succeeded":
                return event
        return None

    def set_instance(self, **values: Any) -> None:
        target = values.get("status")
        if target is not None and target != self.instance.status:
            # The one transition table (engine/statuses.py) guards every status change.
            check_instance_transition(self.instance.status, target)
        if "context" in values:
            # A whole new context (an operator's edit, a restore, a rerun): its delta is the diff.
            changed, removed = deltas.diff(self.instance.context, values["context"])
            self._record_delta(changed, removed)
            values = {**values, "context_bytes": json_size(values["context"])}
        for name, value in values.items():
            setattr(self.instance, name, value)
        self.instance_fields.update(values)

    def context_size_with(self, updates: dict[str, Any]) -> int:
        """The JSON size of the context with `updates` laid over it, from the instance's known size
        and the changed keys only (never serialising the whole context: a step's cost must not grow
        with it)."""
        inst = self.instance
        old = inst.context
        size = int(inst.context_bytes) if inst.context_bytes or not old else json_size(old)
        for key, value in updates.items():
            if key in old:
                size -= len(to_json(key)) + len(to_json(old[key])) + 4
            size += len(to_json(key)) + len(to_json(value)) + 4
        return size

    def update_context(self, new_context: dict[str, Any], updates: dict[str, Any], size: int) -> None:
        """A step's context updates: `new_context` is the old one with `updates` laid over it (a new
        dict; the old one is never changed in place, others may share it), `size` its JSON size
        (context_size_with)."""
        self._record_delta(updates, ())
        self.instance.context = new_context  # type: ignore[assignment]
        self.instance.context_bytes = size
        self.instance_fields.add("context_bytes")

    def _record_delta(self, changed: dict[str, Any], removed: Any) -> None:
        self.context_changed = True
        for key in removed:
            self.context_set.pop(key, None)
            self.context_unset.add(key)
        for key, value in changed.items():
            self.context_unset.discard(key)
            self.context_set[key] = value

    def add_step(self, step: StepRun) -> StepRun:
        self.new_steps.append(step)
        return step

    def update_step(self, step: StepRun, **fields: Any) -> None:
        """Change a loaded step; the write is conditional on the status it had when first changed here."""
        target = fields.get("status")
        if target is not None and target != step.status:
            check_step_transition(step.status, target)
        if any(step is new for new in self.new_steps):
            for name, value in fields.items():
                setattr(step, name, value)
            return
        change = self.changes.get(id(step))
        if change is None:
            change = self.changes[id(step)] = StepChange(step, {}, str(step.status), step.lease_token)
        change.fields.update(fields)
        for name, value in fields.items():
            setattr(step, name, value)

    def track(self, step: StepRun) -> None:
        """A step this transition holds in memory (a claimed one): reads of the instance's steps
        see this object, so what an earlier decision of the same unit did to it shows."""
        self.tracked[step.pk] = step

    def open_review(self, item: ReviewItem) -> ReviewItem:
        self.new_reviews.append(item)
        return item

    def dispatch(self, step: StepRun) -> None:
        self.enqueue.append(step)

    def after_commit(self, name: str, *args: Any) -> None:
        """Record a post-commit effect by name: runtime/effects.py runs what is registered under it."""
        self.effects.append((name, args))

    def remember_json(self, value: Any, text: str) -> None:
        # The value is kept alongside its text so its id() cannot be reused while the unit lives.
        self.known_json[id(value)] = (value, text)

    def json_of(self, value: Any) -> str | None:
        known = self.known_json.get(id(value))
        return known[1] if known is not None and known[0] is value else None

    # --- Reading back -----------------------------------------------------------------------------

    def delta(self) -> dict[str, Any] | None:
        """The state delta to write, or None when the context did not change."""
        if not self.context_changed or not (self.context_set or self.context_unset):
            return None
        return deltas.make(self.context_set, self.context_unset)

    def delta_seq(self) -> int:
        """A delta's seq: the first event seq of its transition (docs/DESIGN.md)."""
        return self.loaded_seq + 1

    def snapshot_due(self, delta_bytes: int) -> bool:
        """Whether the store writes a full snapshot with this transition, given its delta's size. Here
        only when the unit forces one; the runtime's UnitOfWork (runtime/unit.py) overrides this with
        its policy (runtime/snapshots.py)."""
        return bool(self.checkpoint)

    def state_written(self, delta_bytes: int | None, snapshot_bytes: int | None) -> None:
        """The bookkeeping of what the store writes: called by it once it has serialised the delta
        (None: none) and the snapshot (None: none), before it writes the instance row."""
        inst = self.instance
        if delta_bytes is not None:
            # Moves on every context change, so a cached context under an older seq is stale.
            inst.context_seq = max(inst.event_seq, inst.context_seq + 1)
            inst.delta_bytes += delta_bytes
        if snapshot_bytes is not None:
            inst.snapshot_seq = inst.event_seq
            inst.snapshot_bytes = snapshot_bytes
            inst.delta_bytes = 0
        self.instance_fields.update(("context_seq", "snapshot_seq", "snapshot_bytes", "delta_bytes"))

    def checkpoint_state(self, refs: dict[str, Any] | None = None) -> dict[str, Any]:
        """The snapshot's state: the context's values (but those referred to by `refs`: {key: [seq,
        digest]}, store/snapshot_refs.py) and the instance's bookkeeping."""
        inst = self.instance
        context = {k: v for k, v in inst.context.items() if k not in refs} if refs else inst.context
        state = {"context": context, "state": inst.state, "loop_count": inst.loop_count,
                 "open_steps": inst.open_steps, "status": str(inst.status), "seq": inst.event_seq}
        if refs:
            state["refs"] = refs
        return state

    def event_payload(self, event: PendingEvent) -> dict[str, Any]:
        if event.review is not None:
            return {"review": event.review.pk, **event.payload}
        return event.payload

    def as_decided(self, loaded: list[StepRun], keep: Callable[[StepRun], bool]) -> list[StepRun]:
        """Steps read from the database, seen as this unit has already decided them: a step it changed
        is its changed object (kept only if it still matches), and the steps it changed or created
        that now match are added. (The unit has not written anything yet.)"""
        changed = {**self.tracked, **{change.step.pk: change.step for change in self.changes.values()}}
        seen: set[int] = set()
        result = []
        for step in loaded:
            step = changed.get(step.pk, step)
            seen.add(step.pk)
            if keep(step):
                result.append(step)
        result += [step for pk, step in changed.items() if pk not in seen and id(step) in self.changes
                   and keep(step)]
        result += [step for step in self.new_steps if keep(step)]
        return result

    def jobs(self) -> list[tuple[int, str]]:
        """(step id, RQ queue) of each step to enqueue: its kind's queue at its priority."""
        return [(step.pk, queue_name(step.queue, step.priority)) for step in self.enqueue]
