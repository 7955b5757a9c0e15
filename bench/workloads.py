"""The workloads W1-W3. Imported only after Django is set up against the throwaway database.

Times come from the database's own timestamps where possible (a step's `started_at` and
`finished_at`, an instance's `finished_at`, all taken by the workers from the same clock as the
bench process), so polling intervals do not leak into the figures.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from bench.harness import note, wait_until
from workflows.authoring.definitions import save_version
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import StepRun, WorkflowInstance, WorkflowVersion
from workflows.runtime import start_instance, start_instances

STRUCTURAL = ("start", "end")
# Generous: a loop-breaker halt would otherwise stop a 10-step chain (the default is 10 activations).
SETTINGS = {"max_transitions": 1000, "ttl_s": 3600}


# --- Graphs --------------------------------------------------------------------------------------

def _noop(node_id: str) -> dict[str, Any]:
    return {"id": node_id, "type": "python", "config": {"function": "noop"}}


def chain_graph(length: int) -> dict[str, Any]:
    """start -> s1 -> ... -> s<length> -> end, every step the registered no-op."""
    ids = ["start", *(f"s{i}" for i in range(1, length + 1)), "end"]
    nodes = [{"id": "start", "type": "start"}, *(_noop(n) for n in ids[1:-1]), {"id": "end", "type": "end"}]
    return {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
            "settings": SETTINGS}


def fanout_graph(width: int) -> dict[str, Any]:
    """start -> first -> b1..b<width> (parallel) -> join (waits for all) -> end."""
    branches = [f"b{i}" for i in range(1, width + 1)]
    nodes = [{"id": "start", "type": "start"}, _noop("first"), *(_noop(b) for b in branches), _noop("join"),
             {"id": "end", "type": "end"}]
    edges = [{"source": "start", "target": "first"},
             *({"source": "first", "target": b} for b in branches),
             *({"source": b, "target": "join"} for b in branches),
             {"source": "join", "target": "end"}]
    return {"nodes": nodes, "edges": edges, "settings": SETTINGS}


def llm_graph() -> dict[str, Any]:
    """start -> ask (one OpenAI-compatible chat completion on the `ai` queue) -> end."""
    ask = {"id": "ask", "type": "llm",
           "config": {"provider": "openai", "model": "bench-model", "prompt": "Say hello."}}
    return {"nodes": [{"id": "start", "type": "start"}, ask, {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
            "settings": SETTINGS}


def version_for(slug: str, graph: dict[str, Any]) -> WorkflowVersion:
    return save_version(slug, graph, message="benchmark")


# --- Running -------------------------------------------------------------------------------------

@dataclass
class Batch:
    ids: list[int]
    started: datetime  # just before the first start
    committed: datetime  # the COMMIT, just before the jobs are enqueued
    start_s: float  # creating the instances, committing and enqueueing their jobs


def bulk_start(version: WorkflowVersion, count: int) -> Batch:
    """Create `count` instances in one transaction (runtime.start_instances: one batch of writes, one
    round of enqueues on commit), so the workers see all the work at once (the start cost is
    reported separately)."""
    started = timezone.now()
    t0 = time.perf_counter()
    marks: list[datetime] = []
    with transaction.atomic():
        # Registered first, so it runs first after COMMIT: before the instances' own callbacks
        # enqueue their jobs, which workers start on at once (enqueueing 300 takes ~1 s).
        transaction.on_commit(lambda: marks.append(timezone.now()))
        ids = [instance.pk for instance in start_instances(version, [{"n": i} for i in range(count)])]
    return Batch(ids=ids, started=started, committed=marks[0], start_s=time.perf_counter() - t0)


def wait_settled(ids: list[int], timeout: float, check: Callable[[], None] | None = None,
                 interval: float = 0.05) -> dict[str, int]:
    """Wait until no instance of `ids` is still active; return the count per final status."""
    def settled() -> bool:
        return not WorkflowInstance.objects.filter(pk__in=ids, status__in=INSTANCE_ACTIVE).exists()

    try:
        wait_until(settled, timeout, f"{len(ids)} instances to finish", interval=interval, check=check)
    except TimeoutError:
        counts = Counter(WorkflowInstance.objects.filter(pk__in=ids).values_list("status", flat=True))
        raise TimeoutError(f"instances still active after {timeout:g} s: {dict(counts)}") from None
    counts = Counter(WorkflowInstance.objects.filter(pk__in=ids).values_list("status", flat=True))
    if counts.get(InstanceStatus.COMPLETED, 0) != len(ids):
        bad = (WorkflowInstance.objects.filter(pk__in=ids).exclude(status=InstanceStatus.COMPLETED)
               .values("pk", "status", "halt_reason", "error").first())
        note(f"not every instance completed: {dict(counts)}; first: {bad}")
    return dict(counts)


def executed_steps(ids: list[int]) -> int:
    """Step transitions the workers ran: succeeded steps that are not start/end markers."""
    return (StepRun.objects.filter(instance_id__in=ids, status=StepStatus.SUCCEEDED)
            .exclude(node_type__in=STRUCTURAL).count())


def last_finish(ids: list[int]) -> datetime:
    value = WorkflowInstance.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
    assert value is not None, "no instance has finished"
    return value


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# --- W1 ------------------------------------------------------------------------------------------

def w1_serial(version: WorkflowVersion, chains: int, length: int, check: Callable[[], None]) -> dict[str, Any]:
    """Chains run one at a time on one worker. Per step = (last step's finish - first step's claim)
    / length: claim, handler, commit of each step and the inline hand-over to the next one."""
    per_step: list[float] = []
    end_to_end: list[float] = []
    for i in range(chains):
        inst = start_instance(version, {"n": i})
        wait_settled([inst.pk], 30, check=check, interval=0.002)
        span = (StepRun.objects.filter(instance_id=inst.pk).exclude(node_type__in=STRUCTURAL)
                .aggregate(first=Min("started_at"), last=Max("finished_at")))
        inst.refresh_from_db()
        per_step.append((span["last"] - span["first"]).total_seconds() / length)
        assert inst.finished_at is not None
        end_to_end.append((inst.finished_at - inst.created_at).total_seconds())
    # The first chains warm caches (graph parse, prepared plans): the median ignores them.
    result = {
        "per_step_ms": _ms(statistics.median(per_step)),
        "per_step_ms_min": _ms(min(per_step)),
        "chain_ms_median": _ms(statistics.median(end_to_end)),
    }
    note(f"W1 serial: {chains} chains of {length}: per step median {result['per_step_ms']} ms "
         f"(min {result['per_step_ms_min']}), start-to-completion median {result['chain_ms_median']} ms")
    return result


def w1_throughput(version: WorkflowVersion, chains: int, check: Callable[[], None]) -> dict[str, Any]:
    batch = bulk_start(version, chains)
    # 2,000 chains (W1-scale) on a loaded machine may take minutes: allow 40 steps/s of 10-step chains.
    statuses = wait_settled(batch.ids, max(120.0, chains * 0.25), check=check)
    steps = executed_steps(batch.ids)
    wall = (last_finish(batch.ids) - batch.committed).total_seconds()
    result = {"steps_per_s": round(steps / wall, 1), "steps": steps, "wall_s": round(wall, 3),
              "completed": statuses.get(InstanceStatus.COMPLETED, 0)}
    whole = (last_finish(batch.ids) - batch.started).total_seconds()
    note(f"W1 throughput: {chains} chains, {steps} steps in {wall:.3f} s from the start commit "
         f"({steps / wall:.0f} steps/s); creating, committing and enqueueing them took {batch.start_s:.3f} s; "
         f"from the first start {whole:.3f} s ({steps / whole:.0f} steps/s)")
    return result


# --- W2 ------------------------------------------------------------------------------------------

def w2_fanout(version: WorkflowVersion, workflows: int, check: Callable[[], None]) -> dict[str, Any]:
    batch = bulk_start(version, workflows)
    statuses = wait_settled(batch.ids, 120, check=check)
    steps = executed_steps(batch.ids)
    wall = (last_finish(batch.ids) - batch.committed).total_seconds()
    result = {"workflows_per_s": round(workflows / wall, 1), "steps": steps, "wall_s": round(wall, 3),
              "completed": statuses.get(InstanceStatus.COMPLETED, 0)}
    whole = (last_finish(batch.ids) - batch.started).total_seconds()
    note(f"W2: {workflows} fan-out workflows ({steps} steps) in {wall:.3f} s from the start commit "
         f"({workflows / wall:.1f} wf/s, {steps / wall:.0f} steps/s); creating, committing and enqueueing "
         f"them took {batch.start_s:.3f} s; from the first start {whole:.3f} s ({workflows / whole:.1f} wf/s)")
    return result


# --- W3 ------------------------------------------------------------------------------------------

def w3_llm(version: WorkflowVersion, instances: int, check: Callable[[], None]) -> dict[str, Any]:
    """Wall time from just before the first start to the last completion."""
    batch = bulk_start(version, instances)
    statuses = wait_settled(batch.ids, 240, check=check)
    wall = (last_finish(batch.ids) - batch.started).total_seconds()
    spans = (StepRun.objects.filter(instance_id__in=batch.ids, node_type="llm")
             .aggregate(first=Min("started_at"), last=Max("finished_at")))
    result = {"wall_s": round(wall, 3), "instances": instances,
              "completed": statuses.get(InstanceStatus.COMPLETED, 0)}
    if spans["first"] and spans["last"]:
        def since(moment: datetime) -> str:
            return f"{(moment - batch.started).total_seconds():.3f} s"

        note(f"W3: {instances} llm steps; from the first start: start commit at {since(batch.committed)}, "
             f"first claim at {since(spans['first'])}, creating+committing+enqueueing done at "
             f"{batch.start_s:.3f} s, last step done at {since(spans['last'])}, last instance done at "
             f"{wall:.3f} s")
    return result
