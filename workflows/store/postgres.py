"""PostgreSQL: server-side prepared statements sent through psycopg's pipeline, the common claim as
one statement (statements.PG_CLAIM_STARTED), every lease of a worker extended in one, and a step's
outcome committed in one round trip when the worker holds the instance as it last committed it.

That last one: BEGIN, the instance's UPDATE guarded by the event seq the decision was made on (it
takes the row lock, and fails unless nothing moved the instance since), the step writes guarded by
status and lease token, the inserts, the checkpoint and COMMIT, all in one pipeline. A failed guard
aborts the transaction; the store then takes the lock and the runtime decides again (the general
path: the lock with the lease check in one SELECT, then the writes and COMMIT).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import DataError, connection

from workflows.models import StepRun, WorkflowInstance
from workflows.runtime.unit import UnitOfWork
from workflows.store import statements as sql
from workflows.store.orm import StaleWrite
from workflows.store.sql import SqlStore

log = logging.getLogger("steadyflow.store")
TRANSACTION_CONTROL = frozenset({"BEGIN", "COMMIT"})


class PostgresStore(SqlStore):
    name = "postgresql"
    update_step = sql.PG_UPDATE_STEP
    update_instance = sql.PG_UPDATE_INSTANCE

    def instance_guard(self, unit: UnitOfWork) -> tuple[Any, ...]:
        return (unit.loaded_seq,)

    def cursor(self) -> psycopg.Cursor[Any]:
        # Server-side binding, so statements can be prepared (Django's own cursors bind client-side).
        return psycopg.Cursor(self.raw())

    def _one(self, statement: str, params: Sequence[Any]) -> Any:
        with connection.wrap_database_errors:
            cursor = self.cursor()
            cursor.execute(statement, params, prepare=True)
            return cursor.fetchone()

    def run_batch(self, batch: list[tuple[str, Sequence[Any]]]) -> list[Any]:
        conn = self.raw()
        cursors = []
        with conn.pipeline():
            for statement, params in batch:
                cursor = psycopg.Cursor(conn)
                cursor.execute(statement, params, prepare=statement not in TRANSACTION_CONTROL)
                cursors.append(cursor)
        return cursors

    def apply(self, unit: UnitOfWork) -> None:
        # The guarded step UPDATE fails its statement (division by zero) where the other stores see
        # no row changed: the same stale write, to be decided again (finish) like theirs.
        try:
            super().apply(unit)
        except DataError as exc:
            if isinstance(exc.__cause__, psycopg.errors.DivisionByZero):
                raise StaleWrite("a step moved on while the runtime decided") from exc
            raise

    def claim_started(self, step_id: int, worker: str, token: str, now: datetime,
                      lease_until: datetime) -> tuple[StepRun, WorkflowInstance] | None:
        # One statement in autocommit: atomic by itself, no BEGIN/COMMIT round trips.
        row = self._one(sql.PG_CLAIM_STARTED, (step_id, worker, token, now, now, lease_until, step_id, now, now, now))
        if row is None:
            return None
        split = len(sql.INSTANCE_COLUMNS)
        instance, step = self.instance_from(row[:split]), self.step_from(row[split:])
        self.publish_started(instance, step, now)
        return step, instance

    def finish(self, instance_id: int, step_id: int, token: str,
               decide: Callable[[WorkflowInstance], tuple[UnitOfWork, Any]], *,
               fresh: WorkflowInstance | None = None) -> tuple[bool, Any]:
        if fresh is not None and not connection.in_atomic_block:
            unit, result = decide(fresh)
            if not unit.new_reviews and self._commit_unlocked(unit):
                return True, result
        return super().finish(instance_id, step_id, token, decide)

    def _commit_unlocked(self, unit: UnitOfWork) -> bool:
        """BEGIN, the unit's guarded writes and COMMIT in one round trip. False (rolled back) when a
        guard failed: the instance or the step moved on while the runtime decided."""
        batch, steps = self.unit_batch(unit)
        conn = self.raw()
        try:
            with connection.wrap_database_errors:
                cursors = self.run_batch([("BEGIN", ()), *batch, ("COMMIT", ())])
        except Exception as exc:  # noqa: BLE001 - any failure: roll back, the locked path decides
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            if not isinstance(cause, psycopg.errors.DivisionByZero):
                raise
            return False
        # BEGIN, then the instance's UPDATE, then the step writes (ids of the new steps).
        self._check_steps(unit, cursors[2:2 + steps])
        self.after_commit(unit)
        return True

    def extend_leases(self, leases: Iterable[tuple[int, str]], now: datetime, until: datetime) -> int:
        held = list(leases)
        if not held:
            return 0
        with connection.wrap_database_errors:
            cursor = self.cursor()
            cursor.execute(sql.PG_EXTEND_LEASES, (until, now, [pk for pk, _ in held], [token for _, token in held]),
                           prepare=True)
            return int(cursor.rowcount)
