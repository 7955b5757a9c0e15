"""PostgreSQL: statements sent through psycopg's pipeline (one round trip per batch), the common
claim as one statement (statements.PG_CLAIM_STARTED), every lease of a worker extended in one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from workflows.models import StepRun, WorkflowInstance
from workflows.store import statements as sql
from workflows.store.sql import SqlStore


class PostgresStore(SqlStore):
    name = "postgresql"

    def run_batch(self, batch: list[tuple[str, Sequence[Any]]]) -> list[Any]:
        conn = self.raw()
        cursors = []
        with conn.pipeline():
            for statement, params in batch:
                cursor = conn.cursor()
                cursor.execute(statement, params)
                cursors.append(cursor)
        return cursors

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

    def extend_leases(self, leases: Iterable[tuple[int, str]], now: datetime, until: datetime) -> int:
        held = list(leases)
        if not held:
            return 0
        with connection.wrap_database_errors:
            cursor = self.raw().cursor()
            cursor.execute(sql.PG_EXTEND_LEASES, (until, now, [pk for pk, _ in held], [token for _, token in held]))
            return int(cursor.rowcount)
