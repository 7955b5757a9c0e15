"""The `workers` and `W1-scale` lines: does W1 grow with worker processes, and does its cost stay
flat as the work and the history grow?

    workers   W1 (200 chains of 10 no-op steps) with 1, 2 and 4 `run_worker default` processes
    W1-scale  W1 with 200 chains (the reference, measured right before), with 2,000 chains, then again
              with 200 chains once 100,000 finished instances (copies of a real one, with their
              steps, events and checkpoints: bench/seed.py) are in the database. Target: both within
              10% of the 200-chain run's steps/s: a step's cost must not grow with the history.

Imported by `python -m bench` once Django is set up on the throwaway database.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bench import workloads as wl
from bench.harness import Cluster, cpu_seconds, note
from bench.measure import CpuMeter, emit, load_average, set_default_workers
from bench.seed import seed_history
from workflows.engine.statuses import InstanceStatus
from workflows.models import WorkflowInstance, WorkflowVersion
from workflows.runtime import start_instance


def measured_w1(cluster: Cluster, chain: WorkflowVersion, chains: int, check: Callable[[], None]) -> dict[str, Any]:
    """One W1 throughput run with the CPU of the `default` workers (and database backends) per step,
    and of the scheduler: its reconciler looks at every step queued for longer than
    REDISPATCH_AFTER_S on each tick, which a 2,000-chain backlog makes it do for a minute or more,
    on the same 2 cores as the workers."""
    scheduler = cluster.pids("scheduler")
    before = cpu_seconds(scheduler)
    with CpuMeter(cluster, prefix="worker-default-") as cpu:
        result = wl.w1_throughput(chain, chains, check)
    steps = max(result["steps"], 1)
    scheduler_ms = round((cpu_seconds(scheduler) - before) / steps * 1000, 3)
    note(f"CPU per step: scheduler {scheduler_ms} ms")
    return {**result, **cpu.per_step(steps), "scheduler_cpu_ms_per_step": scheduler_ms}


def _ratio(value: float, reference: float) -> float | None:
    return round(value / reference, 3) if reference else None


def run_workers(args: argparse.Namespace, cluster: Cluster, chain: WorkflowVersion, db_kind: str,
                check: Callable[[], None]) -> bool:
    """W1 with each worker count of --worker-counts; leaves --workers processes running. True if
    every instance completed."""
    load = load_average()
    runs: dict[str, dict[str, Any]] = {}
    ok = True
    for count in args.worker_counts:
        set_default_workers(cluster, count)
        wl.w1_throughput(chain, max(count * 4, 10), check)  # warm every worker's connection and caches
        run = measured_w1(cluster, chain, args.chains, check)
        note(f"workers: {count} -> {run['steps_per_s']} steps/s")
        runs[str(count)] = run
        ok &= run["completed"] == args.chains
    set_default_workers(cluster, args.workers)
    line: dict[str, Any] = {"workload": "workers", "db": db_kind, "chains": args.chains,
                            "steps_per_s": {k: r["steps_per_s"] for k, r in runs.items()}}
    for key in ("worker_cpu_ms_per_step", "db_cpu_ms_per_step", "scheduler_cpu_ms_per_step"):
        if all(key in r for r in runs.values()):
            line[key] = {k: r[key] for k, r in runs.items()}
    line["completed"] = {k: r["completed"] for k, r in runs.items()}
    emit(line, load)
    return ok


def run_w1_scale(args: argparse.Namespace, cluster: Cluster, chain: WorkflowVersion, db_kind: str,
                 check: Callable[[], None]) -> bool:
    """The reference 200-chain run, the 2,000-chain run, the seeding, the 200-chain run on top of the
    history. True if every instance completed."""
    load = load_average()
    wl.w1_throughput(chain, max(args.workers * 4, 10), check)  # warm-up, as W1 does
    base = measured_w1(cluster, chain, args.chains, check)
    big = measured_w1(cluster, chain, args.scale_chains, check)

    # The template: one chain run alone, so its rows have contiguous ids (those of concurrent chains
    # interleave) and the copies' ids stay dense.
    template = start_instance(chain, {"n": -1}).pk
    if wl.wait_settled([template], 60, check=check).get(InstanceStatus.COMPLETED) != 1:
        raise RuntimeError("W1-scale: the template chain did not complete")
    note(f"W1-scale: seeding {args.history:,} finished instances (copies of instance {template}) ...")
    seeded = seed_history(template, args.history)
    note(f"W1-scale: seeded {seeded.total_rows:,} rows {seeded.rows} in {seeded.seconds:.1f} s "
         f"({seeded.total_rows / seeded.seconds:,.0f} rows/s"
         + (f", of which VACUUM (ANALYZE) {seeded.analyze_s:.1f} s" if seeded.analyze_s else "") + ")")

    wl.w1_throughput(chain, max(args.workers * 4, 10), check)  # the same warm-up after the bulk insert
    after = measured_w1(cluster, chain, args.chains, check)

    line: dict[str, Any] = {
        "workload": "W1-scale", "db": db_kind, "workers": args.workers, "chains": args.chains,
        "steps_per_s": base["steps_per_s"],
        "scale_chains": args.scale_chains, "scale_steps_per_s": big["steps_per_s"],
        "scale_ratio": _ratio(big["steps_per_s"], base["steps_per_s"]),
        "history": args.history, "history_steps_per_s": after["steps_per_s"],
        "history_ratio": _ratio(after["steps_per_s"], base["steps_per_s"]),
        "seed_s": round(seeded.seconds, 2), "seed_rows": seeded.total_rows,
        "seed_rows_per_s": round(seeded.total_rows / seeded.seconds) if seeded.seconds else None,
        "instances_in_db": WorkflowInstance.objects.count(),
    }
    for key in ("worker_cpu_ms_per_step", "db_cpu_ms_per_step", "scheduler_cpu_ms_per_step"):
        if key in base and key in big and key in after:
            line[key] = {"base": base[key], "scale": big[key], "history": after[key]}
    line["completed"] = {"base": base["completed"], "scale": big["completed"], "history": after["completed"]}
    emit(line, load)
    return (base["completed"], big["completed"], after["completed"]) == (args.chains, args.scale_chains, args.chains)
