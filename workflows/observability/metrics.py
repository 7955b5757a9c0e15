"""Prometheus metrics (docs/operating.md, Observability).

Two kinds:

- **Counted where it happens**, in process, by the commit observer (`observe_commit`, registered on
  the runtime's hook: workflows/runtime/observe.py), the ai consumer and the reconciler: steps,
  durations, queue waits, halts, tokens, cost, LLM calls in flight, re-dispatches, lease expiries.
  No query and no Redis round trip: an increment of a value in memory, or in an mmap'd file when
  PROMETHEUS_MULTIPROC_DIR is set (the web's /metrics then adds up every process's files).
- **Read from the database at scrape time** (`DatabaseCollector`, only in the process that serves
  /metrics): instances by status, breaker states, the review queue's size and age. Gauges of
  state the database already holds; nothing to keep in step.

Label values are bounded: node types are the registered kinds, queues the three queues (or a
graph's own few), statuses and reasons fixed sets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from workflows import clock
from workflows.engine.event_kinds import COMPENSATE_PREFIX
from workflows.engine.nodes.llm_tools import TOOL_PREFIX
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.store.unit import UnitOfWork

# Steps take from a millisecond (a no-op python node) to minutes (an LLM call, a slow API).
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800)

STEPS = Counter("steadyflow_steps", "Step attempts that left `running`, by what they came to",
                ["node_type", "queue", "status"])
STEP_DURATION = Histogram("steadyflow_step_duration_seconds", "Claim to commit of a step attempt",
                          ["node_type", "queue"], buckets=STEP_BUCKETS)
QUEUE_WAIT = Histogram("steadyflow_step_queue_wait_seconds", "Due (queued) to claimed, per step attempt",
                       ["queue"], buckets=WAIT_BUCKETS)
INSTANCES_FINISHED = Counter("steadyflow_instances_finished", "Instances that reached a final status",
                             ["status"])
HALTS = Counter("steadyflow_halts", "Instances halted into review, by reason", ["reason"])
LLM_TOKENS = Counter("steadyflow_llm_tokens", "Tokens used by llm steps", ["kind"])
LLM_COST = Counter("steadyflow_llm_cost_usd", "Cost of llm steps in USD (STEADYFLOW_LLM_PRICES)")
# livesum: the sum over live processes (a dead consumer's calls are not in flight any more).
LLM_IN_FLIGHT = Gauge("steadyflow_llm_calls_in_flight", "LLM calls the ai consumers are awaiting",
                      multiprocess_mode="livesum")
REDISPATCHES = Counter("steadyflow_reconciler_redispatches", "Queued steps no queue held, enqueued again")
LEASE_EXPIRIES = Counter("steadyflow_lease_expiries", "Running steps taken back after their lease expired")
PROMOTED = Counter("steadyflow_reconciler_promoted", "Timers and retries made due by the scheduler")
# liveall: one series per live process (pid label), the offset each measured (workflows/clock.py).
CLOCK_OFFSET = Gauge("steadyflow_clock_offset_seconds",
                     "This process's offset to the database's clock (database minus host), last measured",
                     multiprocess_mode="liveall")
clock.listeners.append(CLOCK_OFFSET.set)
TTL_EXPIRIES = Counter("steadyflow_ttl_expiries", "Instances stopped past their deadline by the scheduler")

FINAL = frozenset({InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED,
                   InstanceStatus.COMPENSATED})
RUNNING = str(StepStatus.RUNNING)

# Label children by their label values: `.labels()` validates and locks on every call; a dict
# lookup is what the hot path can afford (measured in the docs/operating.md, Observability).
_children: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *values: str) -> Any:
    key = (metric, *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def observe_commit(unit: UnitOfWork) -> None:
    """The commit observer: what a committed unit of work did, counted in memory."""
    now = unit.now
    nodes = unit.graph.nodes
    for change in unit.changes.values():
        fields = change.fields
        status = fields.get("status")
        if status is None or change.expect_status != RUNNING:
            continue  # only a step attempt leaving `running` is an outcome
        step = change.step
        node = nodes.get(step.node_id)
        node_type = node.type if node is not None else (
            "compensation" if step.node_id.startswith(COMPENSATE_PREFIX)
            else "tool" if step.node_id.startswith(TOOL_PREFIX) else "unknown")
        queue = step.queue
        _child(STEPS, node_type, queue, str(status)).inc()
        started = step.started_at
        if started is not None:
            _child(STEP_DURATION, node_type, queue).observe(max((now - started).total_seconds(), 0.0))
            due = step.due_at or step.created_at
            if due is not None:
                _child(QUEUE_WAIT, queue).observe(max((started - due).total_seconds(), 0.0))
        usage = fields.get("usage")
        if usage:
            _count_usage(usage)
    for event in unit.events:
        if event.type == "instance_halted":
            _child(HALTS, str(event.payload.get("reason", ""))).inc()
    if "status" in unit.instance_fields and unit.instance.status in FINAL:
        _child(INSTANCES_FINISHED, str(unit.instance.status)).inc()


def _count_usage(usage: dict[str, Any]) -> None:
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if prompt:
        _child(LLM_TOKENS, "prompt").inc(float(prompt))
    if completion:
        _child(LLM_TOKENS, "completion").inc(float(completion))
    cost = usage.get("cost_usd")
    if cost:
        LLM_COST.inc(float(cost))


def count_tick(promoted: int, redispatched: int, reclaimed: int, expired: int) -> None:
    """What one reconciler tick did (the scheduler, `manage.py reconcile`)."""
    if promoted:
        PROMOTED.inc(promoted)
    if redispatched:
        REDISPATCHES.inc(redispatched)
    if reclaimed:
        LEASE_EXPIRIES.inc(reclaimed)
    if expired:
        TTL_EXPIRIES.inc(expired)


# --- Read at scrape time ------------------------------------------------------------------------

class DatabaseCollector(Collector):
    """Gauges of what the database holds, read when /metrics is scraped (three small queries)."""

    def describe(self) -> list[Metric]:
        # Known names without touching the database (registering a collector calls describe()).
        return [GaugeMetricFamily(name, doc) for name, doc in DATABASE_GAUGES.items()]

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, Min

        from workflows.models import BreakerState, ReviewItem, WorkflowInstance

        by_status = GaugeMetricFamily("steadyflow_instances", DATABASE_GAUGES["steadyflow_instances"],
                                      labels=["status"])
        counts = dict(WorkflowInstance.objects.values_list("status").annotate(n=Count("id")).order_by())
        for status in InstanceStatus:
            by_status.add_metric([str(status)], float(counts.get(status, 0)))
        yield by_status

        breakers = GaugeMetricFamily("steadyflow_breaker_state", DATABASE_GAUGES["steadyflow_breaker_state"],
                                     labels=["key", "state"])
        for key, state in BreakerState.objects.values_list("key", "state"):
            for candidate in ("closed", "open", "half_open"):
                breakers.add_metric([key, candidate], 1.0 if state == candidate else 0.0)
        yield breakers

        now = clock.now()
        size = GaugeMetricFamily("steadyflow_review_queue_size", DATABASE_GAUGES["steadyflow_review_queue_size"],
                                 labels=["reason"])
        age = GaugeMetricFamily("steadyflow_review_queue_oldest_age_seconds",
                                DATABASE_GAUGES["steadyflow_review_queue_oldest_age_seconds"], labels=["reason"])
        for reason, n, oldest in (ReviewItem.objects.filter(status="open").values_list("reason")
                                  .annotate(n=Count("id"), oldest=Min("created_at")).order_by()):
            size.add_metric([reason], float(n))
            age.add_metric([reason], max((now - oldest).total_seconds(), 0.0) if oldest else 0.0)
        yield size
        yield age


DATABASE_GAUGES = {
    "steadyflow_instances": "Instances by status (read from the database at scrape time)",
    "steadyflow_breaker_state": "Circuit breakers: 1 for the state each breaker is in",
    "steadyflow_review_queue_size": "Open review items, by reason",
    "steadyflow_review_queue_oldest_age_seconds": "Age of the oldest open review item, by reason",
}


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition() -> tuple[bytes, str]:
    """The text /metrics serves: every process's counters (added up from PROMETHEUS_MULTIPROC_DIR,
    or this process's own without it) and the database gauges."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    path = multiprocess_dir()
    if path:
        counted = CollectorRegistry()
        MultiProcessCollector(counted, path=path)
    else:
        counted = REGISTRY
    database = CollectorRegistry()
    database.register(DatabaseCollector())
    return generate_latest(counted) + generate_latest(database), CONTENT_TYPE_LATEST


def metric_names() -> set[str]:
    """Every metric name /metrics can serve, as Prometheus queries see them (a counter's `_total`, a
    histogram's `_bucket`, `_sum` and `_count`): what the Grafana dashboard's test checks against."""
    names = set(DATABASE_GAUGES)
    for metric in (STEPS, STEP_DURATION, QUEUE_WAIT, INSTANCES_FINISHED, HALTS, LLM_TOKENS, LLM_COST, LLM_IN_FLIGHT,
                   REDISPATCHES, LEASE_EXPIRIES, PROMOTED, TTL_EXPIRIES):
        for family in metric.describe():
            if family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
            else:
                names.add(family.name)
    return names


def mark_process_dead() -> None:
    """At a worker's exit: its live gauges (calls in flight) stop counting."""
    path = multiprocess_dir()
    if path:
        from workflows.observability import prometheus_dir

        prometheus_dir.mark_process_dead(path)
