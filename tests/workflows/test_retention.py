"""Retention (workflows/retention/): what goes (finished instances' steps, events and checkpoints past
STEADYFLOW_RETENTION_DAYS), what stays (the instance row, active instances, a parent of an active
sub-workflow, anything an open review item needs, reviews and audit entries), batches, the daily rollup
that keeps the charts' figures identical once the history is gone, 0 = keep forever, checkpoint pruning
of active instances, the scheduler's tick and `manage.py retention`. Steps run in this process on both
stores."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import F
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.errors import PermanentStepError
from workflows.engine.functions import FunctionCall, register_function
from workflows.engine.statuses import StepStatus
from workflows.models import (
    AuditEntry,
    Checkpoint,
    DailyRollup,
    Event,
    ReviewItem,
    StateDelta,
    StepRun,
    WorkflowInstance,
)
from workflows.retention import checkpoints, history, rollup
from workflows.retention import runner as retention
from workflows.scheduler import reconciler

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("store", ["orm", "sql"])]

DAY = timedelta(days=1)
_slugs = itertools.count(1)


@register_function("tests.retention_boom")
def boom(call: FunctionCall) -> None:
    raise PermanentStepError("this step always fails")


@pytest.fixture(autouse=True)
def _fresh_cursor(store: str, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store, "RETENTION_DAYS": 30.0, "RETENTION_BATCH": 50,
                           "CHECKPOINTS_KEEP": 3}
    history.CURSOR = history.Cursor()
    retention.schedule = retention.Schedule()


def finished(days_ago: float, *, steps: int = 2, fail: bool = False, slug: str | None = None,
             tokens: int = 0) -> WorkflowInstance:
    """An instance run to its end in this process, then moved `days_ago` into the past (all its rows)."""
    nodes = [py(f"s{i}", "tests.echo", args={"set": {f"k{i}": "x" * 50}}) for i in range(1, steps + 1)]
    if fail:
        nodes.append(py("boom", "tests.retention_boom"))
    version = save_version(slug or f"ret-{next(_slugs)}", chain(*nodes))
    inst = runtime.start_instance(version, {})
    for _ in range(50):
        step = StepRun.objects.filter(instance=inst, status=StepStatus.QUEUED).order_by("id").first()
        if step is None:
            break
        runtime.run_step(step.pk, "test-worker")
    inst.refresh_from_db()
    assert inst.is_final, inst.status
    age(inst, days_ago)
    if tokens:
        WorkflowInstance.objects.filter(pk=inst.pk).update(tokens=tokens, cost_usd="0.125")
    inst.refresh_from_db()
    return inst


def age(inst: WorkflowInstance, days_ago: float) -> None:
    shift = timezone.now() - inst.finished_at + timedelta(days=days_ago) if inst.finished_at else days_ago * DAY
    WorkflowInstance.objects.filter(pk=inst.pk).update(created_at=F("created_at") - shift,
                                                       finished_at=F("finished_at") - shift)
    StepRun.objects.filter(instance=inst).update(created_at=F("created_at") - shift,
                                                 started_at=F("started_at") - shift,
                                                 finished_at=F("finished_at") - shift)
    Event.objects.filter(instance=inst).update(created_at=F("created_at") - shift)
    Checkpoint.objects.filter(instance=inst).update(created_at=F("created_at") - shift)


# What retention leaves of a finished run's history: no steps, no events, its newest snapshot (the final
# state the summary row shows: docs/DESIGN.md, "State: deltas and snapshots").
GONE = (0, 0, 1)


def history_rows(inst: WorkflowInstance) -> tuple[int, int, int]:
    return (StepRun.objects.filter(instance=inst).count(), Event.objects.filter(instance=inst).count(),
            Checkpoint.objects.filter(instance=inst).count())


def run_all(now: datetime, **options: Any) -> list[retention.Outcome]:
    outcomes = []
    cursor = history.Cursor()
    for _ in range(50):
        outcome = retention.run_once(now, cursor=cursor, **options)
        outcomes.append(outcome)
        if not outcome.more:
            break
    return outcomes


def test_history_past_retention_goes_and_the_instance_row_stays(store: str) -> None:
    old = [finished(40), finished(35, fail=True)]
    recent = finished(10)
    kept_rows = history_rows(recent)
    before = {i.pk: (i.status, i.context, i.finished_at) for i in old}
    outcomes = run_all(timezone.now())
    assert sorted(pk for o in outcomes for pk in o.instances) == sorted(i.pk for i in old)
    for inst in old:
        # Steps and events go; the newest snapshot stays: it holds the final state the summary shows.
        assert history_rows(inst) == GONE
        row = WorkflowInstance.objects.get(pk=inst.pk)  # the summary stays: status, final context, times
        assert (row.status, row.context, row.finished_at) == before[inst.pk]
    assert history_rows(recent) == kept_rows
    rows = {label: n for o in outcomes for label, n in o.rows.items()}
    assert {"workflows.steprun", "workflows.event"} <= set(rows) <= {
        "workflows.steprun", "workflows.event", "workflows.checkpoint", "workflows.statedelta"}
    assert DailyRollup.objects.filter(definition__isnull=True).count() == 3  # every finished day, kept or not
    assert run_all(timezone.now())[0].instances == []


def test_history_tables_are_found_from_the_foreign_keys(store: str) -> None:
    found = {model._meta.label_lower for model, _ in history.history_models()}
    assert found == {"workflows.steprun", "workflows.event", "workflows.checkpoint", "workflows.statedelta"}
    order = [model._meta.label_lower for model, _ in history.history_models()]
    assert order.index("workflows.event") < order.index("workflows.steprun")  # events name steps


def test_zero_keeps_forever(store: str, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "RETENTION_DAYS": 0.0}
    inst = finished(400)
    rows = history_rows(inst)
    outcomes = run_all(timezone.now())
    assert [o.instances for o in outcomes] == [[]] and history_rows(inst) == rows
    assert DailyRollup.objects.filter(definition__isnull=True).count() == 1  # the charts still get their rollup


def test_active_instances_are_never_touched(store: str) -> None:
    running = finished(60)
    # Reopened (a rerun): active again, its old finished_at notwithstanding.
    WorkflowInstance.objects.filter(pk=running.pk).update(status="running")
    rows = history_rows(running)
    assert [o.instances for o in run_all(timezone.now())] == [[]]
    assert history_rows(running) == rows


def test_a_parent_of_an_active_child_keeps_its_history_until_the_child_ends(store: str) -> None:
    parent = finished(60)
    child = finished(60)
    WorkflowInstance.objects.filter(pk=child.pk).update(
        parent_step=StepRun.objects.filter(instance=parent).first(), status="running", finished_at=None)
    assert [o.instances for o in run_all(timezone.now())] == [[]]
    assert history_rows(parent)[0] > 0
    WorkflowInstance.objects.filter(pk=child.pk).update(status="completed",
                                                        finished_at=timezone.now() - 40 * DAY)
    done = [pk for o in run_all(timezone.now()) for pk in o.instances]
    assert sorted(done) == sorted([parent.pk, child.pk])


def test_the_scheduler_looks_again_at_an_instance_an_open_review_kept(store: str) -> None:
    inst = finished(60)
    review = ReviewItem.objects.create(instance=inst, reason="human_task", status="open",
                                       step=StepRun.objects.filter(instance=inst).first())
    AuditEntry.objects.create(instance=inst, action="approve")
    now = timezone.now()
    assert reconciler.tick(now).history_purged == 0
    assert history_rows(inst)[0] > 0
    ReviewItem.objects.filter(pk=review.pk).update(status="approved")
    later = now + retention.IDLE_EVERY
    assert reconciler.tick(later).history_purged == 1
    assert history_rows(inst) == GONE
    review.refresh_from_db()  # reviews and audit entries stay, the step link cleared
    assert review.step_id is None and AuditEntry.objects.filter(instance=inst).count() == 1
    assert reconciler.tick(later + timedelta(seconds=1)).history_purged == 0  # idle until IDLE_EVERY


def test_an_open_review_on_another_instance_keeps_the_steps_it_names(store: str) -> None:
    inst = finished(60)
    other = finished(1)
    ReviewItem.objects.create(instance=other, reason="human_task", status="open",
                              step=StepRun.objects.filter(instance=inst).first())
    run_all(timezone.now())
    assert history_rows(inst)[0] > 0


def test_batches_are_small_and_the_walk_goes_on(store: str) -> None:
    old = [finished(40) for _ in range(5)]
    now = timezone.now()
    cursor = history.Cursor()
    sizes = []
    for _ in range(5):
        outcome = retention.run_once(now, batch=2, cursor=cursor)
        sizes.append(len(outcome.instances))
        if not outcome.more:
            break
    assert sizes[:3] == [2, 2, 1] and sum(sizes) == 5
    assert all(history_rows(i) == GONE for i in old)


def test_the_charts_figures_are_the_same_before_and_after_the_history_goes(store: str) -> None:
    slug = f"charted-{next(_slugs)}"
    insts = [finished(45, slug=slug, tokens=100), finished(45, slug=slug, fail=True),
             finished(44, slug=slug, steps=3, tokens=7), finished(2, slug=slug), finished(0.01, slug=slug)]
    now = timezone.now()
    definition_id = insts[0].definition_id
    before_all = rollup.daily_series(now, 60)
    before_one = rollup.daily_series(now, 60, definition_id)
    assert sum(d["steps_ok"] + d["steps_failed"] for d in before_all) > 0
    assert DailyRollup.objects.count() == 0  # computed live from the history so far
    run_all(now)
    assert history_rows(insts[0]) == GONE and history_rows(insts[3])[0] > 0
    assert rollup.daily_series(now, 60) == before_all
    assert rollup.daily_series(now, 60, definition_id) == before_one
    day = next(d for d in before_all if d["tokens"] == 100)
    assert day["instances"] == {"completed": 1, "failed": 1} and day["cost_usd"] == "0.125000"
    assert day["step_p50_ms"] is not None and day["steps_failed"] == 1


def test_a_dry_run_counts_and_changes_nothing(store: str) -> None:
    inst = finished(40)
    rows = history_rows(inst)
    out = StringIO()
    call_command("retention", "--dry-run", stdout=out)
    assert "would delete the history of 1 instance(s)" in out.getvalue()
    assert history_rows(inst) == rows and DailyRollup.objects.count() == 0
    out = StringIO()
    call_command("retention", "--batch", "1", stdout=out)
    assert "deleted the history of 1 instance(s)" in out.getvalue() and history_rows(inst) == GONE


def test_active_instances_keep_their_newest_checkpoints_that_verify(store: str) -> None:
    inst = finished(0)
    WorkflowInstance.objects.filter(pk=inst.pk).update(status="running", finished_at=None)
    Checkpoint.objects.filter(instance=inst).delete()
    for seq in range(1, 8):
        state = {"context": {"n": seq}, "seq": seq}
        Checkpoint.objects.create(instance=inst, seq=seq, state=state, checksum=Checkpoint.checksum_of(state))
    Checkpoint.objects.filter(instance=inst, seq__in=(7, 5)).update(checksum="0" * 64)  # corrupt
    done = finished(0)
    done_count = Checkpoint.objects.filter(instance=done).count()
    assert checkpoints.prune(10, keep=3, dry_run=True) == 2
    assert checkpoints.prune(10, keep=3) == 2
    assert sorted(Checkpoint.objects.filter(instance=inst).values_list("seq", flat=True)) == [3, 4, 5, 6, 7]
    assert Checkpoint.objects.filter(instance=done).count() == done_count  # finished: left to retention
    assert checkpoints.prune(10, keep=3) == 0


def test_the_daily_chart_api_reads_the_same_figures_and_refuses_bad_input(store: str, django_user_model: Any) -> None:
    from django.contrib.auth.models import Permission
    from django.core.cache import cache
    from django.test import Client

    cache.clear()  # another test's figures (ids and days repeat after a rollback)
    inst = finished(40, slug="api-charted", tokens=9)
    user = django_user_model.objects.create_user("chart-viewer")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="workflows",
                                                     codename="view_workflowinstance"))
    client = Client()
    client.force_login(user)
    before = client.get("/api/dashboard/daily?days=60&workflow=api-charted").json()
    assert sum(d["tokens"] for d in before["days"]) == 9 and before["rolled_up_through"] is None
    run_all(timezone.now())
    assert history_rows(inst) == GONE
    cache.clear()
    after = client.get("/api/dashboard/daily?days=60&workflow=api-charted").json()
    assert after["days"] == before["days"] and after["rolled_up_through"] is not None
    for query, status in (("days=0", 400), ("days=x", 400), ("days=400", 400), ("workflow=nope", 404)):
        response = client.get(f"/api/dashboard/daily?{query}")
        assert response.status_code == status and "message" in response.json(), query
    assert Client().get("/api/dashboard/daily").status_code == 401


def test_a_transaction_holds_a_bounded_number_of_rows_and_the_budget_is_kept(store: str, monkeypatch: Any) -> None:
    old = [finished(40, steps=3) for _ in range(4)]
    rows = history.row_counts([i.pk for i in old])
    # Every history row but the snapshot kept, state deltas included.
    assert all(n == sum(history_rows(i)) - 1 + StateDelta.objects.filter(instance=i).count()
               for i, n in zip(old, rows.values(), strict=True))
    monkeypatch.setattr(history, "ROWS_PER_TRANSACTION", rows[old[0].pk] * 2)
    assert [len(g) for g in history.transactions([i.pk for i in old])] == [2, 2]
    # No time left: one transaction, the rest on the next run (first thing), nothing lost.
    cursor = history.Cursor()
    first = retention.run_once(timezone.now(), budget_s=0.0, cursor=cursor)
    assert len(first.instances) == 2 and first.more and cursor.skipped
    second = retention.run_once(timezone.now(), budget_s=10.0, cursor=cursor)
    assert len(second.instances) == 2 and all(history_rows(i) == GONE for i in old)


def test_a_rerun_never_restores_a_later_state_when_the_activation_checkpoint_was_pruned(store: str) -> None:
    from workflows.operators import operations

    inst = finished(0, steps=4)
    s3 = StepRun.objects.get(instance=inst, node_id="s3")
    activated = Event.objects.filter(instance=inst, step=s3).order_by("seq").first()
    assert activated is not None
    Checkpoint.objects.filter(instance=inst, seq__gte=activated.seq, created_at=activated.created_at).delete()
    operations.rerun_from_node(inst.pk, "s3")
    inst.refresh_from_db()
    # Restored from an older checkpoint (s1's update, maybe s2's), never one with s3's or s4's own updates.
    assert "k1" in inst.context and "k3" not in inst.context and "k4" not in inst.context


def test_the_database_buckets_durations_as_the_histogram_says(store: str) -> None:
    """Bounds are inclusive upper bounds in ms; past the last one is "inf"; percentiles read the bounds."""
    durations = {timedelta(milliseconds=1): "1", timedelta(milliseconds=150): "200", timedelta(seconds=5): "5000",
                 timedelta(hours=3): "21600000", timedelta(days=2): "inf"}
    end = rollup.day_start((timezone.now() - 10 * DAY).date()) + timedelta(hours=12)
    for duration in durations:
        inst = finished(0, steps=1, slug="buckets")
        WorkflowInstance.objects.filter(pk=inst.pk).update(created_at=end - duration, finished_at=end)
    [summary] = rollup.summarize(end - DAY, end + DAY).values()
    assert summary.instance_ms == {bucket: 1 for bucket in durations.values()}
    assert rollup.percentile(summary.instance_ms, 0.5) == 5000.0
    assert rollup.percentile(summary.instance_ms, 1.0) == float(rollup.BUCKETS_MS[-1])
