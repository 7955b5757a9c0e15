"""Priorities with real workers (docs/architecture.md, Priorities): one worker and a backlog takes high before low,
never starves low (a low job runs within STEADYFLOW_PRIORITY_FAIR_EVERY dequeues however much high
work waits), and inside one instance starts the branch with the longest remaining path first.
The ai consumer's JobBook takes from its priority queues in the same order.

Orders are read from the database (each step's started_at, written by its claim), never timed."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from rq import Queue
from rq.worker import BaseWorker

from tests.conftest import chain
from tests.workflows.support import edge, expect_status, py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import StepRun
from workflows.workers import rq_adapter

pytestmark = pytest.mark.django_db(transaction=True)

WORK = chain(py("work", "noop"))


def start(slug: str, count: int, priority: str) -> list[int]:
    version = save_version(slug, WORK)
    return [i.pk for i in runtime.start_instances(version, [{}] * count, priority=priority)]


def started_priorities() -> list[str]:
    """The priority of each `work` step, in the order the worker claimed them."""
    rows = StepRun.objects.filter(node_id="work").order_by("started_at", "pk").values_list("priority", "status")
    assert {status for _, status in rows} == {"succeeded"}, rows
    return [priority for priority, _ in rows]


def drain_with_one_worker(processes: Any, fair_every: int) -> None:
    proc = processes.worker("default", burst=True, env={"STEADYFLOW_PRIORITY_FAIR_EVERY": str(fair_every)})
    assert proc.wait(timeout=120) == 0, processes.logs()


def test_high_before_normal_before_low_with_one_worker(processes: Any) -> None:
    # Queued oldest first: low, then normal, then high; nothing runs until the worker starts.
    start("low-work", 4, "low")
    start("normal-work", 4, "normal")
    start("high-work", 4, "high")
    drain_with_one_worker(processes, fair_every=0)  # strict: the order is the priority's alone
    assert started_priorities() == ["high"] * 4 + ["normal"] * 4 + ["low"] * 4


def test_low_work_is_not_starved_by_a_stream_of_high_work(processes: Any) -> None:
    # Two low jobs behind twelve high ones: strict priority would run them last (13th and 14th).
    # Every third dequeue takes the lowest non-empty queue first, so they run 3rd and 6th.
    start("low-work", 2, "low")
    start("high-work", 12, "high")
    drain_with_one_worker(processes, fair_every=3)
    order = started_priorities()
    assert [n for n, priority in enumerate(order, start=1) if priority == "low"] == [3, 6], order
    assert order.count("high") == 12


def test_the_longest_branch_starts_first_in_one_instance(processes: Any) -> None:
    # start -> short -> end and start -> long1 -> long2 -> long3 -> end; `short` comes first in the
    # JSON, so without the critical path it would be queued (and run) first.
    graph = {"nodes": [{"id": "start", "type": "start"}, py("short", "noop"), py("long1", "noop"),
                       py("long2", "noop"), py("long3", "noop"), {"id": "end", "type": "end"}],
             "edges": [edge("start", "short"), edge("start", "long1"), edge("long1", "long2"),
                       edge("long2", "long3"), edge("short", "end"), edge("long3", "end")]}
    instance = runtime.start_instance(save_version("fan-out", graph), {})
    first = StepRun.objects.filter(instance=instance).exclude(node_id="start").order_by("pk").first()
    assert first is not None and first.node_id == "long1"  # queued first
    drain_with_one_worker(processes, fair_every=0)
    expect_status(instance, "completed")
    order = list(StepRun.objects.filter(instance=instance).exclude(node_type__in=("start", "end"))
                 .order_by("started_at", "pk").values_list("node_id", flat=True))
    assert order[0] == "long1" and order.index("short") > 0, order


def test_a_node_priority_beats_its_instances(processes: Any) -> None:
    # A low instance whose node says high runs before a normal instance's step.
    start("normal-work", 2, "normal")
    graph = chain(py("work", "noop", priority="high"))
    runtime.start_instances(save_version("urgent-node", graph), [{}, {}], priority="low")
    drain_with_one_worker(processes, fair_every=0)
    assert started_priorities() == ["high", "high", "normal", "normal"]


def test_the_ai_consumers_book_takes_high_first_and_low_every_nth_round(redis_conn: Any) -> None:
    names = ["prio-test:high", "prio-test", "prio-test:low"]
    book = rq_adapter.JobBook(names, redis_conn, name="prio-book", monitoring_interval=5, fair_every=3)
    book.bootstrap()
    try:
        queues = {name: Queue(name, connection=redis_conn) for name in names}
        for name, count in (("prio-test:low", 2), ("prio-test", 2), ("prio-test:high", 6)):
            for _ in range(count):
                queues[name].enqueue("workflows.workers.dispatch.job_id_for", 1)
        taken = []
        for _ in range(10):
            (running,) = book.take(1, timeout=None)
            taken.append(running.queue.name)
            book.succeed(running, None)
        assert taken == ["prio-test:high", "prio-test:high", "prio-test:low", "prio-test:high", "prio-test:high",
                         "prio-test:low", "prio-test:high", "prio-test:high", "prio-test", "prio-test"]
        assert book.take(1, timeout=None) == []
    finally:
        book.teardown()


def test_the_worker_order_hook_is_rqs():
    # workers._FairPriorities overrides reorder_queues and sets RQ's private dequeue order.
    assert list(inspect.signature(BaseWorker.reorder_queues).parameters) == ["self", "reference_queue"]
    assert "_ordered_queues" in inspect.getsource(BaseWorker.dequeue_job_and_maintain_ttl)


def test_inline_continuation_keeps_to_one_priority(redis_conn: Any) -> None:
    # a -> b on the same kind: b runs inline after a (one job) only at a's priority; at another it
    # waits on its own queue.
    import django_rq

    graph = chain(py("a", "noop"), py("b", "noop", priority="low"), py("c", "noop", priority="low"))
    instance = runtime.start_instance(save_version("inline-prio", graph), {})
    a = StepRun.objects.get(instance=instance, node_id="a")
    assert runtime.run_step(a.pk, "test-worker") == 1  # b is not run inline
    b = StepRun.objects.get(instance=instance, node_id="b")
    assert b.status == "queued" and b.priority == "low"
    assert django_rq.get_queue("default:low").get_job_ids() == [f"step-{b.pk}"]
    assert runtime.run_step(b.pk, "test-worker") == 2  # c, low like b, follows inline
