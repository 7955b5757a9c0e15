"""W4 "agent transcript": a loop whose context grows with every step, as an agent's transcript does.

`start -> grow -> grow ... -> end`: `grow` is the registered python function `examples.grow_note`
(workflows/examples/functions.py), which adds a new context key holding `--transcript-bytes` (4,000) of
incompressible text (base64 of os.urandom) on each visit; its back edge runs it `--transcript-steps`
(100) times, so the context ends at ~400 KB. The output of each step is small (its visit number).

Run once alone, then `--transcripts` (50) instances at once. Figures (the PostgreSQL peers' growth probe,
../shared/peers/growth_bench.py, measures the same loop):
- `first10_ms` / `last10_ms`: mean time between consecutive `grow` steps' `finished_at` (the database's
  clock) over the first and the last 10 steps, and their ratio `growth` (target 1.3: a step's cost must
  not grow with the context);
- `wal_bytes_per_step` (PostgreSQL; null on SQLite, which reports `db_file_growth_per_step`);
- `table_bytes_per_instance`: growth of the history tables (pg_total_relation_size) per finished
  instance, against `data_bytes` (the JSON size of the final context it holds), and `row_bytes` (the
  single instance's rows, pg_column_size per table);
- worker and database CPU per step, the workers' peak RSS (VmHWM) after the run.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from bench.harness import Cluster, note
from bench.measure import CpuMeter, emit, load_average
from bench.storage import WalMeter, instance_row_bytes, peak_rss_mb, table_bytes
from bench.workloads import SETTINGS, bulk_start, version_for, wait_settled
from workflows.models import StepRun, WorkflowInstance


def transcript_graph(steps: int, size: int) -> dict[str, Any]:
    grow = {"id": "grow", "type": "python",
            "config": {"function": "examples.grow_note", "args": {"bytes": size}}}
    return {"nodes": [{"id": "start", "type": "start"}, grow, {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": "grow"},
                      {"source": "grow", "target": "grow", "when": f"n < {steps}"},
                      {"source": "grow", "target": "end", "when": f"n >= {steps}"}],
            "settings": {**SETTINGS, "max_transitions": max(SETTINGS["max_transitions"], steps * 2 + 10)}}


def step_gaps(instance_id: int) -> list[float]:
    """Seconds between consecutive `grow` steps' finish, in visit order (the first from its claim)."""
    rows = list(StepRun.objects.filter(instance_id=instance_id, node_id="grow").order_by("visit")
                .values_list("started_at", "finished_at"))
    if not rows or rows[0][0] is None or any(f is None for _, f in rows):
        return []
    moments = [rows[0][0], *(finished for _, finished in rows)]
    return [(b - a).total_seconds() for a, b in zip(moments, moments[1:], strict=False)]


def ends(gaps: list[list[float]]) -> dict[str, Any]:
    """Mean of the first and the last 10 gaps, averaged over instances, in ms; and their ratio."""
    gaps = [g for g in gaps if len(g) >= 20]
    if not gaps:
        return {"first10_ms": None, "last10_ms": None, "growth": None}
    first = statistics.mean(statistics.mean(g[:10]) for g in gaps) * 1000
    last = statistics.mean(statistics.mean(g[-10:]) for g in gaps) * 1000
    return {"first10_ms": round(first, 2), "last10_ms": round(last, 2), "growth": round(last / first, 2)}


def _data_bytes(instance_id: int) -> int:
    # The context as the run left it (snapshot plus deltas: docs/DESIGN.md, "State: deltas and snapshots"),
    # not the row's column, which holds the context the instance was created with.
    context = WorkflowInstance.objects.get(pk=instance_id).context
    return len(json.dumps(context, separators=(",", ":")).encode())


def _measure(version: Any, count: int, steps: int, cluster: Cluster, check: Any) -> dict[str, Any]:
    timeout = max(300.0, count * steps * 0.1)
    before = table_bytes()
    with CpuMeter(cluster) as cpu, WalMeter() as wal:
        batch = bulk_start(version, count)
        statuses = wait_settled(batch.ids, timeout, check=check, interval=0.02)
    after = table_bytes()
    executed = StepRun.objects.filter(instance_id__in=batch.ids, node_id="grow", status="succeeded").count()
    finished = WorkflowInstance.objects.filter(pk__in=batch.ids).order_by("-finished_at").values_list(
        "finished_at", flat=True).first()
    wall = (finished - batch.committed).total_seconds() if finished else None
    data = _data_bytes(batch.ids[0])
    result: dict[str, Any] = {
        "instances": count, "steps": executed, **ends([step_gaps(pk) for pk in batch.ids]),
        "wall_s": round(wall, 3) if wall else None,
        "steps_per_s": round(executed / wall, 1) if wall else None,
        **wal.per_step(max(executed, 1)),
        "table_bytes_per_instance": (round((after - before) / count) if after is not None and before is not None
                                     else None),
        "data_bytes": data,
        **cpu.per_step(max(executed, 1)),
        "completed": statuses.get("completed", 0),
    }
    if count == 1:
        result["row_bytes"] = instance_row_bytes(batch.ids[0])
    return result


def run_w4(args: Any, cluster: Cluster, db_kind: str, check: Any) -> bool:
    """The W4 line: one instance alone, then `args.transcripts` at once. True when all completed."""
    load = load_average()
    version = version_for("bench-transcript", transcript_graph(args.transcript_steps, args.transcript_bytes))
    single = _measure(version, 1, args.transcript_steps, cluster, check)
    note(f"W4 alone: {single}")
    many = _measure(version, args.transcripts, args.transcript_steps, cluster, check) if args.transcripts else None
    if many:
        note(f"W4 x{args.transcripts}: {many}")
    line = {"workload": "W4", "db": db_kind, "workers": args.workers, "steps": args.transcript_steps,
            "step_bytes": args.transcript_bytes, **{k: v for k, v in single.items() if k != "instances"},
            "concurrent": many, "worker_peak_rss_mb": peak_rss_mb(cluster.pids("worker-default"))}
    emit(line, load)
    ok = single["completed"] == 1 and (many is None or many["completed"] == args.transcripts)
    return ok
