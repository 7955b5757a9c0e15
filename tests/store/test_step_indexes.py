"""The step table's indexes (migration 0021): on PostgreSQL the scheduler's status indexes and the
dashboard's finished_at index are partial, so a finished step is in neither status index (fewer index
entries per step, indexes that grow with the open work, not with history); on both databases every
query the scheduler runs each tick is served by an index, never a scan of the whole step table (a
partial index the planner cannot prove usable would be exactly that scan)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from workflows.scheduler import reconciler

pytestmark = pytest.mark.django_db

PARTIAL = {"step_open_due": "status", "step_running_lease": "status", "step_finished": "finished_at"}


def plan_of(queryset: object) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # An empty table is cheaper to scan: make the planner show whether it *can* use an index.
            cursor.execute("SET LOCAL enable_seqscan = off")
    return queryset.explain()  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("query", ["due_steps", "queued_before", "expired_leases"])
def test_each_scheduler_query_is_served_by_an_index(query: str) -> None:
    now = timezone.now()
    plan = plan_of(getattr(reconciler, query)(now).values_list("pk")[:100])
    assert "Seq Scan on workflows_steprun" not in plan, plan  # PostgreSQL
    assert "SCAN workflows_steprun" not in plan, plan  # SQLite ("SEARCH ... USING INDEX" when served)


def test_the_dashboards_last_hour_is_served_by_an_index() -> None:
    from workflows.models import StepRun

    since = timezone.now() - timedelta(hours=1)
    # As dashboard/api/stats.py asks on SQLite (PostgreSQL's is raw SQL with the same condition); ordered by
    # id, as the model orders, SQLite scanned the table instead.
    plan = plan_of(StepRun.objects.filter(finished_at__gte=since, started_at__isnull=False).order_by()
                   .values_list("finished_at", "started_at", "status"))
    assert "Seq Scan on workflows_steprun" not in plan and "SCAN workflows_steprun" not in plan, plan


def test_on_postgresql_the_status_and_finished_indexes_are_partial() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps full indexes under these names: its planner cannot match a partial index's "
                    "predicate against bound parameters (migration 0021)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'workflows_steprun'")
        defs = dict(cursor.fetchall())
    assert not {"step_status_due", "step_status_lease", "step_finished_at"} & set(defs), defs
    for name, column in PARTIAL.items():
        assert " WHERE " in defs[name] and column in defs[name].split(" WHERE ")[1], defs[name]
