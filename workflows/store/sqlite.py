"""SQLite: the same statements with `?` placeholders, JSON as text and naive UTC timestamps (as
Django stores them), run one after another inside Django's IMMEDIATE transaction (SQLite has no
network round trips; what matters is skipping the ORM's Python)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from decimal import Context, Decimal
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.utils.dateparse import parse_datetime

from workflows.models import StepRun, WorkflowInstance
from workflows.store import statements as sql
from workflows.store.sql import SqlStore, compact

MICRO = Decimal("0.000001")
# As TolerantDecimalField reads (workflows/fields.py): any finite value SQLite holds loads, even one
# past the column's max_digits (a budget saved before graph numbers were bounded).
WIDE = Context(prec=400)


# The shared statements, and the multi-row event INSERTs of the row patterns units use.
@lru_cache(maxsize=256)
def _sqlite_text(statement: str) -> str:
    return sql.for_sqlite(statement)


class SqliteStore(SqlStore):
    name = "sqlite"
    delta_key_seqs_statement = sql.SQLITE_DELTA_KEY_SEQS

    def text(self, statement: str) -> str:
        return _sqlite_text(statement)

    def ts(self, value: datetime | None) -> Any:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(" ")

    def read_ts(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = parse_datetime(value)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value

    def read_decimal(self, value: Any) -> Any:
        if value is None:
            return None
        return Decimal(str(value)).quantize(MICRO, context=WIDE)

    def run_batch(self, batch: list[tuple[str, Sequence[Any]]]) -> list[Any]:
        conn = self.raw()
        cursors = []
        for statement, params in batch:
            cursor = conn.cursor()
            cursor.execute(self.text(statement), [str(p) if isinstance(p, Decimal) else p for p in params])
            cursors.append(cursor)
        return cursors

    def claim_batch(self, step_ids: list[int], worker: str, token: str, now: datetime,
                    lease_until: datetime) -> list[tuple[WorkflowInstance, list[StepRun]]]:
        at = self.ts(now)
        groups: list[tuple[WorkflowInstance, list[StepRun]]] = []
        with transaction.atomic(), connection.wrap_database_errors:
            cursor = self.raw().cursor()
            cursor.execute(self.text(sql.SQLITE_CLAIM_BATCH),
                           (worker, token, at, at, self.ts(lease_until), json.dumps(step_ids), at))
            by_instance: dict[int, list[StepRun]] = {}
            for step in sorted((self.step_from(row) for row in cursor.fetchall()), key=lambda step: step.pk):
                by_instance.setdefault(step.instance_id, []).append(step)
            for instance_id in sorted(by_instance):
                steps = by_instance[instance_id]
                instance = self.instance_from(self._one(sql.SQLITE_BUMP_SEQ_BY, (len(steps), at, instance_id)))
                first = instance.event_seq - len(steps) + 1
                self.run_batch([(sql.insert_events((False,) * len(steps)),
                                 [value for n, step in enumerate(steps)
                                  for value in (instance.pk, first + n, "step_started", step.node_id, step.pk,
                                                started_payload(step), at)])])
                groups.append((instance, steps))
        return groups

    def extend_leases(self, leases: Iterable[tuple[int, str]], now: datetime, until: datetime) -> int:
        held = list(leases)
        if not held:
            return 0
        extended = 0
        with transaction.atomic(), connection.wrap_database_errors:
            for cursor in self.run_batch([(sql.EXTEND_LEASE, (self.ts(until), self.ts(now), pk, token))
                                          for pk, token in held]):
                extended += cursor.rowcount
        return extended



def started_payload(step: StepRun) -> str:
    """step_started's payload, as PostgreSQL's claim builds it with jsonb_build_object."""
    return compact({"visit": step.visit, "attempt": step.attempt, "worker": step.worker, "queue": step.queue})
