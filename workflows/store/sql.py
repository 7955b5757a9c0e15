"""The SQL store: the hot path in hand-written statements (statements.py), one subclass per
database overriding only its hooks (postgres.py, sqlite.py). Cold paths (operators' reads, review
items) stay on the ORM it inherits from the reference store.

A finished step costs two round trips on PostgreSQL besides BEGIN/COMMIT: the lock (instance row
and the step's lease in one SELECT) and one pipeline carrying every write of the unit — step
updates and inserts, the instance (without its context), all of its events in one INSERT, its state
delta and, when the policy says so (runtime/snapshots.py), a snapshot. Each output is serialised once: for the size
check and the write; the delta and the snapshot once each, for the write and their checksums.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from workflows.engine import deltas
from workflows.models import StepRun, WorkflowInstance
from workflows.store import snapshot_refs
from workflows.store import statements as sql
from workflows.store.orm import OrmStore, StaleWrite, loads
from workflows.store.unit import UnitOfWork

CANONICAL = {"sort_keys": True, "separators": (",", ":"), "default": str}


def canonical(value: Any) -> str:
    return json.dumps(value, **CANONICAL)  # type: ignore[arg-type]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


# How each column of a row is read back: (position, "json" | "ts" | "decimal" | "bool").
Plan = tuple[tuple[int, str], ...]


def _plan(columns: tuple[str, ...], kinds: dict[str, frozenset[str]]) -> Plan:
    return tuple((index, kind) for index, column in enumerate(columns)
                 for kind, names in kinds.items() if column in names)


INSTANCE_PLAN = _plan(sql.INSTANCE_COLUMNS, {
    "json": sql.INSTANCE_JSON, "ts": frozenset({"deadline", "created_at", "updated_at", "finished_at"}),
    "decimal": frozenset({"cost_usd", "budget_usd"})})
STEP_PLAN = _plan(sql.STEP_COLUMNS, {
    "json": sql.STEP_JSON,
    "ts": frozenset({"lease_until", "due_at", "created_at", "started_at", "finished_at", "heartbeat_at"}),
    "bool": frozenset({"degraded"})})


class SqlStore(OrmStore):
    """Shared by both databases; the hooks below are what a dialect overrides."""

    name = "sql"
    placeholder_style = "%s"

    # --- Hooks ----------------------------------------------------------------------------------

    def raw(self) -> Any:
        """The DB-API connection under Django's (same transaction as the ORM's)."""
        connection.ensure_connection()
        return connection.connection

    def text(self, statement: str) -> str:
        return statement

    def ts(self, value: datetime | None) -> Any:
        return value

    def read_ts(self, value: Any) -> datetime | None:
        return value  # type: ignore[no-any-return]

    def read_decimal(self, value: Any) -> Any:
        return value

    def run_batch(self, batch: list[tuple[str, Sequence[Any]]]) -> list[Any]:
        """Execute statements in order, in one round trip where the driver can; their cursors."""
        raise NotImplementedError

    # --- Hydration ------------------------------------------------------------------------------

    def _converted(self, row: Sequence[Any], plan: Plan) -> list[Any]:
        values = list(row)
        for index, kind in plan:
            value = values[index]
            if value is not None:
                values[index] = (loads(value) if kind == "json" else self.read_ts(value) if kind == "ts"
                                 else self.read_decimal(value) if kind == "decimal" else bool(value))
        return values

    def instance_from(self, row: Sequence[Any]) -> WorkflowInstance:
        instance: WorkflowInstance = WorkflowInstance.from_db(connection.alias, None,
                                                              self._converted(row, INSTANCE_PLAN))
        return instance

    def step_from(self, row: Sequence[Any]) -> StepRun:
        step: StepRun = StepRun.from_db(connection.alias, None, self._converted(row, STEP_PLAN))
        return step

    # --- Locks and reads ------------------------------------------------------------------------

    def _one(self, statement: str, params: Sequence[Any]) -> Any:
        with connection.wrap_database_errors:
            cursor = self.raw().cursor()
            cursor.execute(self.text(statement), params)
            return cursor.fetchone()

    def lock_instance(self, instance_id: int) -> WorkflowInstance:
        row = self._one(sql.LOCK_INSTANCE, (instance_id,))
        if row is None:
            raise WorkflowInstance.DoesNotExist(f"instance {instance_id} does not exist")
        return self.instance_from(row)

    def lock_for_finish(self, instance_id: int, step_id: int, token: str) -> tuple[WorkflowInstance, bool]:
        row = self._one(sql.LOCK_FOR_FINISH, (step_id, token, instance_id))
        if row is None:
            raise WorkflowInstance.DoesNotExist(f"instance {instance_id} does not exist")
        return self.instance_from(row[:-1]), bool(row[-1])

    def claim_queued(self, step_id: int, worker: str, token: str, now: datetime,
                     lease_until: datetime) -> StepRun | None:
        row = self._one(sql.CLAIM_QUEUED, (worker, token, self.ts(now), self.ts(now), self.ts(lease_until), step_id))
        return self.step_from(row) if row is not None else None

    def latest_output(self, instance_id: int, node_id: str) -> dict[str, Any] | None:
        row = self._one(sql.LATEST_OUTPUT, (instance_id, node_id))
        if row is None:
            return None
        return {"output": loads(row[0]) if row[0] is not None else None, "visit": row[1]}

    def claim_started(self, step_id: int, worker: str, token: str, now: datetime,
                      lease_until: datetime) -> tuple[StepRun, WorkflowInstance] | None:
        """The batch claim of one step (the dialects' claim_batch)."""
        for instance, steps in self.claim_batch([step_id], worker, token, now, lease_until):
            return steps[0], instance
        return None

    # --- Writing a unit of work -------------------------------------------------------------------

    def _json(self, unit: UnitOfWork, value: Any) -> str | None:
        if value is None:
            return None
        known = unit.json_of(value)
        return known if known is not None else compact(value)

    def _step_values(self, unit: UnitOfWork, step: StepRun) -> list[Any]:
        return [step.status, step.attempt, self._json(unit, step.input), self._json(unit, step.output),
                self._json(unit, step.error), self._json(unit, step.usage), step.worker, step.lease_token,
                self.ts(step.lease_until), self.ts(step.due_at), self.ts(step.started_at),
                self.ts(step.finished_at), step.degraded]

    def _insert_values(self, unit: UnitOfWork, step: StepRun) -> list[Any]:
        return [step.instance_id, step.node_id, step.node_type, step.visit, step.attempt, step.status, step.queue,
                self._json(unit, step.input), self._json(unit, step.output), self._json(unit, step.error),
                self._json(unit, step.usage), step.worker, step.lease_token, self.ts(step.lease_until),
                self.ts(step.due_at), step.idempotency_key, step.trace_id, self.ts(step.created_at),
                self.ts(step.started_at), self.ts(step.finished_at), self.ts(step.heartbeat_at), step.degraded,
                step.priority]

    # Dialect hooks for the write batch: PostgreSQL's guarded forms fail the statement itself.
    update_step = sql.UPDATE_STEP
    update_instance = sql.UPDATE_INSTANCE

    checks_rowcount = True

    def instance_guard(self, unit: UnitOfWork) -> tuple[Any, ...]:
        return ()

    def _step_batch(self, unit: UnitOfWork) -> list[tuple[str, Sequence[Any]]]:
        batch: list[tuple[str, Sequence[Any]]] = []
        for change in unit.changes.values():
            batch.append((self.update_step, [*self._step_values(unit, change.step), change.step.pk,
                                             change.expect_status, change.expect_token]))
        for step in unit.new_steps:
            batch.append((sql.INSERT_STEP, self._insert_values(unit, step)))
        return batch

    def _check_steps(self, unit: UnitOfWork, cursors: list[Any]) -> None:
        changes = list(unit.changes.values())
        for change, cursor in zip(changes, cursors, strict=False):
            if self.checks_rowcount and cursor.rowcount == 0:
                raise StaleWrite(f"step {change.step.pk} is no longer {change.expect_status}")
        for step, cursor in zip(unit.new_steps, cursors[len(changes):], strict=False):
            step.pk = cursor.fetchone()[0]
            step._state.adding = False
            step._state.db = connection.alias

    def events_statement(self, unit: UnitOfWork, now: Any) -> tuple[str, Sequence[Any]]:
        """All of the unit's events in one multi-row INSERT (PostgreSQL overrides: one statement text
        for any number of rows)."""
        inst = unit.instance
        params: list[Any] = []
        of_new_steps = []
        for event in unit.events:
            payload = compact(unit.event_payload(event))
            step = event.step
            new = step is not None and step.pk is None
            of_new_steps.append(new)
            if new:
                assert step is not None
                params += (inst.pk, event.seq, event.type, event.node_id, inst.pk, step.node_id, step.visit, payload,
                           now)
            else:
                params += (inst.pk, event.seq, event.type, event.node_id, step.pk if step is not None else None,
                           payload, now)
        return sql.insert_events(tuple(of_new_steps)), params

    def events_statements(self, units: list[UnitOfWork]) -> list[tuple[str, Sequence[Any]]]:
        """The units' events, after every step write of the batch (an event of a new step finds its id
        by the step's unique key): one multi-row INSERT per unit here; PostgreSQL overrides with one
        statement for all of them."""
        return [self.events_statement(unit, self.ts(unit.now)) for unit in units if unit.events]

    def units_batch(self, units: list[UnitOfWork], first: int = 0) -> tuple[list[tuple[str, Sequence[Any]]],
                                                                            list[tuple[int, int]]]:
        """The statements that write several units (of different instances) in one batch, and for
        each unit where its step writes are in the batch (offset by `first`) and how many."""
        batch: list[tuple[str, Sequence[Any]]] = []
        spans = []
        for unit in units:
            statements, steps = self.unit_batch(unit)
            # Each unit's batch: the instance's UPDATE, then its step writes (new steps' ids).
            spans.append((first + len(batch) + 1, steps))
            batch += statements
        batch += self.events_statements(units)
        return batch, spans

    def unit_batch(self, unit: UnitOfWork) -> tuple[list[tuple[str, Sequence[Any]]], int]:
        """The statements that write a unit but its events (the instance first: its lock comes before
        any step's), and how many of them, after the first, are its step writes (checked once they ran).
        Its events: events_statements, after a whole batch's step writes."""
        inst = unit.instance
        inst.updated_at = unit.now
        state_json = canonical(inst.state)
        delta = unit.delta()
        delta_text = canonical(delta) if delta is not None else None
        snapshot = None
        if unit.snapshot_due(len(delta_text) if delta_text is not None else 0):
            refs = snapshot_refs.refs_for(self, unit)
            snapshot = self._checkpoint_text(unit, canonical(snapshot_refs.inline_context(inst.context, refs)),
                                             state_json, canonical(refs) if refs else None)
        unit.state_written(len(delta_text) if delta_text is not None else None,
                           len(snapshot) if snapshot is not None else None)
        batch: list[tuple[str, Sequence[Any]]] = [(self.update_instance, (
            inst.status, state_json, inst.loop_count, inst.max_transitions, self.ts(inst.deadline),
            inst.open_steps, inst.event_seq, inst.halt_reason, self._json(unit, inst.error), inst.tokens,
            inst.cost_usd, inst.budget_usd, self.ts(inst.updated_at), self.ts(inst.finished_at),
            inst.context_seq, inst.snapshot_seq, inst.snapshot_bytes, inst.delta_bytes, inst.context_bytes, inst.pk,
            *self.instance_guard(unit)))]
        steps = self._step_batch(unit)
        batch += steps
        now = self.ts(unit.now)
        if unit.close_reviews:
            batch.append((sql.CLOSE_REVIEWS, (now, inst.pk)))
        if delta_text is not None:
            seq = unit.delta_seq()
            batch.append((sql.INSERT_DELTA, (inst.pk, seq, delta_text, deltas.checksum_text(seq, delta_text), now)))
        if snapshot is not None:
            batch.append((sql.INSERT_CHECKPOINT, (inst.pk, inst.event_seq, snapshot,
                                                  hashlib.sha256(snapshot.encode()).hexdigest(), now)))
        return batch, len(steps)

    def apply_many(self, units: list[UnitOfWork]) -> None:
        """Several units (of different instances: a bulk start) in one batch, one round trip."""
        if any(unit.new_reviews for unit in units):
            super().apply_many(units)
            return
        batch, spans = self.units_batch(units)
        with connection.wrap_database_errors:
            cursors = self.run_batch(batch)
            for unit, (first, steps) in zip(units, spans, strict=True):
                self._check_steps(unit, cursors[first:first + steps])
        for unit in units:
            self.remember_context(unit)

    def apply(self, unit: UnitOfWork) -> None:
        written: tuple[dict[Any, Any], list[Any]] | None = None
        if unit.new_reviews:
            # Review items are rare (halts, human tasks) and need their step's id, and their own id
            # goes into an event: write the steps first, the items through the ORM, then the rest.
            with connection.wrap_database_errors:
                if unit.close_reviews:
                    # Only the items open before this transition close (as in the reference store).
                    self.run_batch([(sql.CLOSE_REVIEWS, (self.ts(unit.now), unit.instance.pk))])
                    unit.close_reviews = False
                self._check_steps(unit, self.run_batch(self._step_batch(unit)))
            # Written: the batch below must not write them again, but the runtime's post-commit effects
            # (commit observers: the step metrics) read them, so they are put back afterwards.
            written = (dict(unit.changes), list(unit.new_steps))
            unit.changes.clear()
            unit.new_steps.clear()
            for item in unit.new_reviews:
                item.save(force_insert=True)
        batch, spans = self.units_batch([unit])
        steps = spans[0][1]
        with connection.wrap_database_errors:
            cursors = self.run_batch(batch)
            self._check_steps(unit, cursors[1:1 + steps])
        if written is not None:
            unit.changes.update(written[0])
            unit.new_steps[:0] = written[1]
        self.remember_context(unit)

    @staticmethod
    def _checkpoint_text(unit: UnitOfWork, context_json: str, state_json: str, refs_json: str | None) -> str:
        """The checkpoint's canonical JSON, assembled from the parts already serialised: byte for byte
        what Checkpoint.checksum_of serialises (keys sorted: context, loop_count, open_steps, [refs],
        seq, state, status)."""
        inst = unit.instance
        refs = f'"refs":{refs_json},' if refs_json is not None else ""
        return (f'{{"context":{context_json},"loop_count":{canonical(inst.loop_count)},'
                f'"open_steps":{canonical(inst.open_steps)},{refs}"seq":{canonical(inst.event_seq)},'
                f'"state":{state_json},"status":{canonical(str(inst.status))}}}')

    delta_key_seqs_statement = sql.PG_DELTA_KEY_SEQS

    def delta_key_seqs(self, instance_id: int, after_seq: int) -> dict[str, int]:
        with connection.wrap_database_errors:
            cursor = self.raw().cursor()
            cursor.execute(self.text(self.delta_key_seqs_statement), (instance_id, after_seq))
            return {str(key): int(seq) for key, seq in cursor.fetchall()}

    def extend_leases(self, leases: Iterable[tuple[int, str]], now: datetime, until: datetime) -> int:
        raise NotImplementedError
