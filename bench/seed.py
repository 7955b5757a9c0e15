"""Seed a database with history: N copies of one finished instance, in bulk SQL.

W1-scale asks whether a step costs more once the database holds a long history (100,000 finished
instances). The history must look like what the engine writes, so it is copied from a template: one
instance the workers really ran to completion, with all of its rows (the instance, its step rows,
events and checkpoints). Copy n gets fresh ids, its own trace id and step idempotency keys (both
derived from its instance id, as the engine derives them), no instance idempotency key (unique), and
every timestamp moved `spacing_s * n` seconds into the past, so the copies spread over days of
history before the template. Whatever the engine writes per instance (the ORM store's 12 step rows,
~37 events and 11 checkpoints of a 10-step chain, or fewer rows with another store), the copies have
the same shape.

One `INSERT ... SELECT` per table and chunk, crossed with a number series (`generate_series` on
PostgreSQL, a recursive CTE on SQLite), so no row passes through Python. Chunks keep each write
transaction short: on SQLite the scheduler, which keeps polling, must not wait out its lock timeout.
On PostgreSQL the sequences are moved past the copied ids and the tables VACUUMed and ANALYZEd
afterwards (a long-lived database with that history would have statistics and a visibility map;
autovacuum would otherwise start on them during the next measurement). SQLite is left as Django
leaves it (no ANALYZE).

Only integers computed here and column names quoted by the backend are put into the SQL text.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import DatabaseError, connection, models, transaction

from workflows.models import Checkpoint, Event, StateDelta, StepRun, WorkflowInstance

# The tables copied per instance, parents first.
CHILD_MODELS: tuple[type[models.Model], ...] = (StepRun, Event, Checkpoint, StateDelta)


@dataclass
class SeedResult:
    instances: int
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows inserted
    seconds: float = 0.0  # inserting, plus VACUUM (ANALYZE) on PostgreSQL
    analyze_s: float = 0.0  # the VACUUM (ANALYZE)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


@dataclass
class _Ids:
    """Where the copies' ids of one table start: copy n (1-based) of template row r gets
    base + (n - 1) * span + (r.id - low) + 1."""

    base: int
    low: int
    span: int

    def expr(self, column: str, copy: str) -> str:
        return f"({self.base} + ({copy} - 1) * {self.span} + ({column} - {self.low}) + 1)"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _series(low: int, high: int) -> str:
    """A FROM item named g with one integer column n, low..high."""
    if connection.vendor == "postgresql":
        # bigint: with a template whose rows are spread out (ids interleaved with other instances'),
        # copy number x id span passes 2^31.
        return f"generate_series({int(low)}::bigint, {int(high)}::bigint) AS g(n)"
    return (f"(WITH RECURSIVE s(n) AS (SELECT {int(low)} UNION ALL SELECT n + 1 FROM s WHERE n < {int(high)}) "
            f"SELECT n FROM s) AS g")


def _shifted(column: str, seconds: str) -> str:
    """The timestamp `column` moved `seconds` (an SQL integer expression) into the past; NULL stays NULL."""
    if connection.vendor == "postgresql":
        return f"({column} - ({seconds}) * interval '1 second')"
    # Django stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS[.ffffff]' text in UTC.
    return f"strftime('%Y-%m-%d %H:%M:%f', {column}, '-' || ({seconds}) || ' seconds')"


def _hex32(value: str) -> str:
    if connection.vendor == "postgresql":
        return f"lpad(to_hex({value}), 32, '0')"
    return f"printf('%032x', {value})"


def _id_span(model: type[models.Model], template_id: int) -> _Ids:
    table = _q(model._meta.db_table)
    fk = "id" if model is WorkflowInstance else "instance_id"
    with connection.cursor() as cur:
        cur.execute(f"SELECT MIN(id), MAX(id) FROM {table} WHERE {_q(fk)} = %s", [template_id])
        low, high = cur.fetchone()
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
        (top,) = cur.fetchone()
    if low is None:  # the template has no rows in this table: nothing to copy
        return _Ids(base=int(top), low=0, span=0)
    return _Ids(base=int(top), low=int(low), span=int(high) - int(low) + 1)


def _select_list(model: type[models.Model], ids: dict[type[models.Model], _Ids], spacing_s: int) -> list[str]:
    """One SQL expression per concrete column of `model`, reading template row t and copy number g.n."""
    new_instance = ids[WorkflowInstance].expr("t.id" if model is WorkflowInstance else "t.instance_id", "g.n")
    seconds = f"g.n * {int(spacing_s)}"
    exprs = []
    for f in model._meta.concrete_fields:
        col = f"t.{_q(f.column)}"
        if f.primary_key:
            exprs.append(ids[model].expr(col, "g.n"))
        elif f.column == "instance_id":
            exprs.append(new_instance)
        elif model is Event and f.column == "step_id":
            exprs.append(ids[StepRun].expr(col, "g.n"))  # NULL stays NULL
        elif isinstance(f, models.DateTimeField):
            exprs.append(_shifted(col, seconds))
        elif f.name == "trace_id":
            # new_trace_id()'s shape: 00-<32 hex trace id>-<16 hex span>-01; the trace id from the copy.
            exprs.append(f"('00-' || {_hex32(new_instance)} || substr({col}, 36))")
        elif model is WorkflowInstance and f.name == "idempotency_key":
            exprs.append("NULL")
        elif model is StepRun and f.name == "idempotency_key":
            # The engine's key: "<instance id>:<node id>:<visit>".
            exprs.append(f"(CAST({new_instance} AS TEXT) || ':' || t.node_id || ':' || CAST(t.visit AS TEXT))")
        else:
            exprs.append(col)
    return exprs


def _insert_copies(model: type[models.Model], template_id: int, low: int, high: int,
                   ids: dict[type[models.Model], _Ids], spacing_s: int) -> int:
    table = _q(model._meta.db_table)
    columns = ", ".join(_q(f.column) for f in model._meta.concrete_fields)
    fk = "id" if model is WorkflowInstance else "instance_id"
    sql = (f"INSERT INTO {table} ({columns}) SELECT {', '.join(_select_list(model, ids, spacing_s))} "
           f"FROM {_series(low, high)} CROSS JOIN {table} AS t WHERE t.{_q(fk)} = {int(template_id)} "
           # Copy by copy, so ids (and most index keys) grow monotonically: appends at the right edge
           # of each B-tree instead of splits all over the chunk's range (SQLite keeps CROSS JOIN's
           # order, the template's rows come from the instance_id index in id order: no sort).
           "ORDER BY g.n, t.id")
    with connection.cursor() as cur:
        cur.execute(sql)
        return int(cur.rowcount)


@contextmanager
def _sqlite_bulk_mode() -> Iterator[None]:
    """On SQLite, for this connection only: no per-row foreign key lookups (the copies' keys are
    derived from the template's, which the engine wrote consistently; tests/bench checks them) and a
    256 MB page cache (the default 2 MB thrashes once the tables outgrow it): 2-3 times faster."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("PRAGMA cache_size")
        (cache,) = cur.fetchone()
        cur.execute("PRAGMA foreign_keys = OFF")  # takes effect outside a transaction only
        cur.execute("PRAGMA cache_size = -262144")
    try:
        yield
    finally:
        with connection.cursor() as cur:
            cur.execute("PRAGMA foreign_keys = ON")
            cur.execute(f"PRAGMA cache_size = {int(cache)}")


def _skip_pg_fk_triggers() -> None:
    """On PostgreSQL, for the current transaction: no foreign key triggers. Django's foreign keys are
    DEFERRABLE INITIALLY DEFERRED, so each inserted row queues a check that runs at COMMIT (a
    SELECT ... FOR KEY SHARE of its parent, which also dirties the parent row): that queue took longer
    than the inserts. Needs a superuser (as the bench's throwaway database is usually made by); without
    one the checks simply run."""
    if connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(), connection.cursor() as cur:  # a savepoint: a refusal leaves no trace
            cur.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        pass


def seed_history(template_id: int, count: int, chunk: int = 5000, spacing_s: int = 3) -> SeedResult:
    """Insert `count` copies of the finished instance `template_id` (with its steps, events and
    checkpoints), `chunk` copies per transaction. Nothing else may create rows in these tables while
    it runs (the ids are allocated from the current maxima). A template that ran alone has
    contiguous ids per table, so the copies' ids are dense too."""
    template = WorkflowInstance.objects.get(pk=template_id)
    if template.finished_at is None:
        raise ValueError(f"instance {template_id} has not finished: seed from a finished one")
    all_models: tuple[type[models.Model], ...] = (WorkflowInstance, *CHILD_MODELS)
    ids = {model: _id_span(model, template_id) for model in all_models}
    result = SeedResult(instances=count, rows={m._meta.db_table: 0 for m in all_models})
    t0 = time.perf_counter()
    with _sqlite_bulk_mode():
        for low in range(1, count + 1, chunk):
            high = min(low + chunk - 1, count)
            with transaction.atomic():
                _skip_pg_fk_triggers()
                for model in all_models:
                    if ids[model].span:
                        result.rows[model._meta.db_table] += _insert_copies(model, template_id, low, high, ids,
                                                                            spacing_s)
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            for model in all_models:
                table = model._meta.db_table
                cur.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT MAX(id) FROM "
                            f"{_q(table)}))", [_q(table)])
            t1 = time.perf_counter()
            # VACUUM too: autovacuum would otherwise start on 6 million fresh rows (insert-triggered
            # vacuum) in the middle of the next measurement, and a long-lived database is vacuumed.
            cur.execute("VACUUM (ANALYZE) " + ", ".join(_q(m._meta.db_table) for m in all_models))
            result.analyze_s = time.perf_counter() - t1
    result.seconds = time.perf_counter() - t0
    return result
