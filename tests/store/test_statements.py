"""statements.py: its column lists follow the models (rows hydrate positionally), every statement
runs on its database with the parameters its docstring names, and the runtime's rules it repeats are
the Python constants' (every literal is one of their values; the claim's rule is may_run's)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, models, transaction

from tests.store import graphs
from tests.store.driver import Driver
from workflows.engine import deltas
from workflows.engine.event_kinds import COMPENSATE_PREFIX, EVENT_KINDS
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import Event, ReviewStatus, StepRun, WorkflowInstance
from workflows.runtime.activation import may_run
from workflows.store import get_store
from workflows.store import statements as sql
from workflows.store.sqlite import started_payload


def _columns(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(field.column for field in model._meta.concrete_fields)


def _json_columns(model: type[models.Model]) -> frozenset[str]:
    return frozenset(f.column for f in model._meta.concrete_fields if isinstance(f, models.JSONField))


def test_column_lists_follow_the_models() -> None:
    assert sql.INSTANCE_COLUMNS == _columns(WorkflowInstance)
    assert sql.STEP_COLUMNS == _columns(StepRun)
    assert sql.INSTANCE_JSON == _json_columns(WorkflowInstance)
    assert sql.STEP_JSON == _json_columns(StepRun)
    # Hydration turns the step's `degraded` column into a bool (store/sql.py's STEP_PLAN).
    assert isinstance(StepRun._meta.get_field("degraded"), models.BooleanField)


def _statement_names() -> list[str]:
    return sorted(name for name, value in vars(sql).items()
                  if name.isupper() and not name.startswith("_") and isinstance(value, str)
                  and value.split(None, 1)[0].upper() in ("SELECT", "UPDATE", "INSERT", "WITH"))


def _for_vendor(name: str) -> bool:
    if name.startswith("PG_"):
        return connection.vendor == "postgresql"
    if name.startswith("SQLITE_"):
        return connection.vendor == "sqlite"
    return True


class Ids:
    def __init__(self, instance: WorkflowInstance, step: StepRun, now: datetime) -> None:
        self.instance = instance.pk
        self.seq = instance.event_seq
        self.step = step.pk
        store = get_store("sql")
        self.now = store.ts(now)
        self.until = store.ts(now + timedelta(seconds=30))
        self.deadline = store.ts(instance.deadline)


# Each statement's parameters, in its docstring's order, and what running it on a queued step `a` of
# a fresh instance must give: ("row", n) one row of n columns, ("rows", n) n rows changed, ("none", 0)
# no row.
PARAMS: dict[str, tuple[Callable[[Ids], tuple[Any, ...]], tuple[str, int]]] = {
    "LOCK_INSTANCE": (lambda i: (i.instance,), ("row", len(sql.INSTANCE_COLUMNS))),
    "LOCK_FOR_FINISH": (lambda i: (i.step, "token", i.instance), ("row", len(sql.INSTANCE_COLUMNS) + 1)),
    "CLAIM_QUEUED": (lambda i: ("w", "token", i.now, i.now, i.until, i.step), ("row", len(sql.STEP_COLUMNS))),
    "SQLITE_BUMP_SEQ_BY": (lambda i: (1, i.now, i.instance), ("row", len(sql.INSTANCE_COLUMNS))),
    "PG_CLAIM_BATCH": (lambda i: ([i.step], "w", "token", i.now, i.now, i.until, [i.step], i.now, i.now, i.now),
                       ("row", len(sql.INSTANCE_COLUMNS) + len(sql.STEP_COLUMNS))),
    "SQLITE_CLAIM_BATCH": (lambda i: ("w", "token", i.now, i.now, i.until, json.dumps([i.step]), i.now),
                           ("row", len(sql.STEP_COLUMNS))),
    "PG_EXTEND_LEASES": (lambda i: (i.until, i.now, [i.step], ["token"]), ("rows", 0)),
    "EXTEND_LEASE": (lambda i: (i.until, i.now, i.step, "token"), ("rows", 0)),
    "LATEST_OUTPUT": (lambda i: (i.instance, "start"), ("row", 2)),
    "UPDATE_STEP": (lambda i: (*_step_values(i), i.step, "queued", ""), ("rows", 1)),
    "PG_UPDATE_STEP": (lambda i: (*_step_values(i), i.step, "queued", ""), ("row", 1)),
    "INSERT_STEP": (lambda i: _new_step(i), ("row", 1)),
    "UPDATE_INSTANCE": (lambda i: (*_instance_values(i), i.instance), ("rows", 1)),
    "PG_UPDATE_INSTANCE": (lambda i: (*_instance_values(i), i.instance, i.seq), ("row", 1)),
    "INSERT_EVENT": (lambda i: (i.instance, i.seq + 1, "test", "", None, '{"a": 1}', i.now), ("rows", 1)),
    "PG_INSERT_EVENTS": (lambda i: ([i.instance, i.instance], [i.seq + 1, i.seq + 2], ["test", "test"],
                                    ["", "a"], [None, None], [None, "a"], [None, 1], ['{"a": 1}', "{}"],
                                    [i.now, i.now]), ("rows", 2)),
    "INSERT_CHECKPOINT": (lambda i: (i.instance, i.seq + 1, '{"a": 1}', "0" * 64, i.now), ("rows", 1)),
    "INSERT_DELTA": (lambda i: (i.instance, i.seq + 1, '{"set": {"a": 1}, "unset": []}', "0" * 64, i.now),
                     ("rows", 1)),
    "CLOSE_REVIEWS": (lambda i: (i.now, i.instance), ("rows", 0)),
    # A fresh instance has no deltas: no row (tests/store/test_snapshot_refs.py runs them on some).
    "PG_DELTA_KEY_SEQS": (lambda i: (i.instance, 0), ("none", 0)),
    "SQLITE_DELTA_KEY_SEQS": (lambda i: (i.instance, 0), ("none", 0)),
}


def _step_values(i: Ids) -> tuple[Any, ...]:
    return ("running", 1, '{"in": 1}', None, None, None, "w", "token", i.until, None, i.now, None, False)


def _new_step(i: Ids) -> tuple[Any, ...]:
    return (i.instance, "b", "python", 9, 0, "queued", "default", None, None, None, None, "", "", None, i.now,
            f"{i.instance}:b:9", "trace", i.now, None, None, None, False, "high")


def _instance_values(i: Ids) -> tuple[Any, ...]:
    return ("running", '{"visits": {}}', 2, 10, i.deadline, 1, i.seq, "", None, 0, "0", None, i.now,
            None, i.seq, i.seq, 100, 0, 10)


def test_every_statement_has_its_parameters_here() -> None:
    assert set(_statement_names()) == set(PARAMS)


@pytest.mark.parametrize("name", _statement_names())
def test_statement_runs_on_its_database(name: str, use_store: Callable[[str], None], db: None, driver: Driver,
                                        version: Callable[..., Any]) -> None:
    if not _for_vendor(name):
        pytest.skip(f"{name} is for another database")
    use_store("sql")
    instance = driver.start(version(graphs.chain()), {"x": 1})
    step = StepRun.objects.get(instance=instance, node_id="a")
    params, (kind, expected) = PARAMS[name]
    statement = getattr(sql, name)
    raw = get_store().raw()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            import psycopg

            # As the store sends them: bound server-side and prepared.
            cursor: Any = psycopg.Cursor(raw)
            cursor.execute(statement, params(Ids(instance, step, driver.clock.now)), prepare=True)
        else:
            cursor = raw.cursor()
            cursor.execute(sql.for_sqlite(statement), params(Ids(instance, step, driver.clock.now)))
        if kind == "row":
            row = cursor.fetchone()
            assert row is not None and len(row) == expected, row
            assert cursor.fetchone() is None
        elif kind == "none":
            assert cursor.fetchone() is None
        else:
            assert cursor.rowcount == expected
        transaction.set_rollback(True)


def test_sqlite_text_has_no_postgresql_syntax() -> None:
    for name in _statement_names():
        if name.startswith("PG_"):
            continue
        text = sql.for_sqlite(getattr(sql, name))
        assert "%s" not in text and "::" not in text and "FOR UPDATE" not in text, name
        assert text.count("?") == getattr(sql, name).count("%s"), name


# --- The runtime's rules, from its constants ---------------------------------------------------------

def _literals(text: str) -> set[str]:
    return {match.replace("''", "'") for match in re.findall(r"'((?:[^']|'')*)'", text)}


def test_every_literal_in_the_statements_is_a_constants_value() -> None:
    step_started_keys = set(json.loads(started_payload(StepRun(visit=1, attempt=1, worker="w", queue="q"))))
    constants = ({*StepStatus, *InstanceStatus, *ReviewStatus.values, COMPENSATE_PREFIX, sql.STEP_STARTED}
                 | step_started_keys)
    # The state delta's format (engine/deltas.py) and the JSON type and path words that read it.
    constants |= {deltas.SET, f"$.{deltas.SET}", "object", "{}"}
    for name in _statement_names():
        stray = _literals(getattr(sql, name)) - {str(value) for value in constants}
        assert not stray, f"{name} types {stray} instead of writing the constants"
    # The claims write exactly the constants' values: the active statuses, the compensation prefix
    # and its length, the event kind that means "running".
    for name in ("PG_CLAIM_BATCH", "SQLITE_CLAIM_BATCH"):
        text = getattr(sql, name)
        [active] = re.findall(r"ELSE \S+ IN \(([^)]*)\)", text)
        assert _literals(active) == {str(status) for status in INSTANCE_ACTIVE}
        assert f"{len(COMPENSATE_PREFIX)}) = '{COMPENSATE_PREFIX}' THEN" in text
        assert f"= '{InstanceStatus.COMPENSATING}' ELSE" in text
    assert sql.STEP_STARTED in EVENT_KINDS and f"'{sql.STEP_STARTED}'" in sql.PG_CLAIM_BATCH
    assert _literals(sql.CLOSE_REVIEWS) == {ReviewStatus.OPEN, ReviewStatus.CLOSED}


@pytest.mark.django_db
def test_the_claims_rule_is_the_runtimes_for_every_status() -> None:
    """The condition both claims use (statements.may_run), evaluated by the database, against
    runtime/activation.may_run: every instance status, a compensation step and others."""
    condition = sql.may_run("t.node_id", "t.status")
    nodes = ["a", f"{COMPENSATE_PREFIX}a", COMPENSATE_PREFIX.rstrip(":"), f"x{COMPENSATE_PREFIX}a"]
    with connection.cursor() as cursor:
        for status in InstanceStatus:
            for node in nodes:
                cursor.execute(f"SELECT {condition} FROM (SELECT %s AS node_id, %s AS status) AS t",
                               [node, str(status)])
                got = bool(cursor.fetchone()[0])
                assert got == may_run(WorkflowInstance(status=status), node), (status, node)


@pytest.mark.parametrize("of_new_steps", [(False,), (True,), (False, True, True, False)])
def test_a_units_events_are_one_insert(of_new_steps: tuple[bool, ...], use_store: Callable[[str], None], db: None,
                                       driver: Driver, version: Callable[..., Any]) -> None:
    """insert_events: any mix of rows naming a step by id and rows naming one inserted earlier in the
    batch by (node, visit), in one statement; the second kind gets that step's id."""
    use_store("sql")
    instance = driver.start(version(graphs.chain()), {"x": 1})
    step = StepRun.objects.get(instance=instance, node_id="a")
    ids = Ids(instance, step, driver.clock.now)
    params: list[Any] = []
    for n, new in enumerate(of_new_steps, start=1):
        params += ((ids.instance, ids.seq + n, "test", "a", ids.instance, "a", 1, "{}", ids.now) if new
                   else (ids.instance, ids.seq + n, "test", "", None, '{"a": 1}', ids.now))
    statement = sql.insert_events(of_new_steps)
    with transaction.atomic():
        raw = get_store().raw()
        if connection.vendor == "postgresql":
            import psycopg

            cursor: Any = psycopg.Cursor(raw)
            cursor.execute(statement, params, prepare=True)
        else:
            cursor = raw.cursor()
            cursor.execute(sql.for_sqlite(statement), params)
        assert cursor.rowcount == len(of_new_steps)
        written = list(Event.objects.filter(instance_id=ids.instance, seq__gt=ids.seq).order_by("seq")
                       .values_list("step_id", flat=True))
        assert written == [step.pk if new else None for new in of_new_steps]
        transaction.set_rollback(True)
