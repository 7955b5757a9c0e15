"""`python -m bench.instrumentation`: the worker CPU observability adds to one durable step.

Times, in this process and without a database, what the hot path now runs per step beyond its
earlier work: the commit observer on a unit shaped like a W1 step's (the step `running ->
succeeded`, its inline successor created, three events; workflows/metrics.observe_commit), the
log-context ContextVar set (`observe.current_step`), the step's derived traceparent
(`observe.step_traceparent`), and registering the observer call after COMMIT (one closure). With
--multiprocess the metric values go to mmap'd files as under `make run` (PROMETHEUS_MULTIPROC_DIR,
a temporary directory here); without it, to memory. Prints one JSON line: microseconds per step,
each part and the total (process CPU time, best of --repeat runs). Measurement only, nothing
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import timedelta
from typing import Any


def best_cpu_us(fn: Any, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - started) / n * 1e6)
    return round(best, 3)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instrumentation", description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--multiprocess", action="store_true")
    args = parser.parse_args()
    if args.multiprocess:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="sf-bench-prom-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()
    from django.utils import timezone

    from workflows.engine.graph import Graph
    from workflows.models import StepRun, WorkflowInstance
    from workflows.observability import metrics
    from workflows.runtime import observe
    from workflows.runtime.unit import UnitOfWork

    graph = Graph.from_json({"nodes": [{"id": "start", "type": "start"},
                                       {"id": "a", "type": "python", "config": {"function": "x"}},
                                       {"id": "b", "type": "python", "config": {"function": "x"}},
                                       {"id": "end", "type": "end"}],
                             "edges": [{"source": "start", "target": "a"}, {"source": "a", "target": "b"},
                                       {"source": "b", "target": "end"}]})
    now = timezone.now()
    instance = WorkflowInstance(pk=1, status="running", event_seq=3, trace_id="00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    step = StepRun(pk=10, instance_id=1, node_id="a", visit=1, attempt=1, queue="default", status="running",
                   created_at=now - timedelta(milliseconds=3), due_at=now - timedelta(milliseconds=3),
                   started_at=now - timedelta(milliseconds=1), lease_token="t", worker="w")

    def unit() -> UnitOfWork:
        uow = UnitOfWork(instance, graph, now)
        step.status = "running"
        uow.update_step(step, status="succeeded", output={}, usage={}, finished_at=now)
        uow.add_step(StepRun(instance_id=1, node_id="b", visit=1, attempt=1, queue="default", status="running",
                             created_at=now, started_at=now))
        uow.event("step_succeeded", "a", step)
        uow.event("edges_taken", "a")
        uow.event("step_started", "b")
        return uow

    sample_unit = unit()
    n, repeat = args.steps, args.repeat
    claim: Any = object()
    parts = {
        "observe_commit": best_cpu_us(lambda: metrics.observe_commit(sample_unit), n, repeat),
        "current_step_set": best_cpu_us(lambda: observe.current_step.set(claim), n, repeat),
        "step_traceparent": best_cpu_us(lambda: observe.step_traceparent(instance.trace_id, 10, 1), n, repeat),
        "after_commit_closure": best_cpu_us(lambda: (lambda: observe.committed(sample_unit)), n, repeat),
    }
    print(json.dumps({"load": os.getloadavg()[0], "multiprocess": args.multiprocess, "unit": "us per step",
                      **parts, "total": round(sum(parts.values()), 3)}))


if __name__ == "__main__":
    main()
