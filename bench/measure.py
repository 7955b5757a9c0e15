"""What every workload of `python -m bench` shares once Django is set up: the JSON line it prints,
the worker pool it runs on and the CPU it costs."""

from __future__ import annotations

import json
import os
from typing import Any

from bench.harness import Cluster, LockSampler, cpu_seconds, note, wait_until

# Set once by `python -m bench` after Django is set up: the store the engine runs with
# (settings.STEADYFLOW["STORE"], "sql" or "orm") and the throwaway database's URL.
RUN: dict[str, str] = {}


def load_average() -> float:
    """The 1-minute load average: the wall-clock figures move with it on a shared machine."""
    return round(os.getloadavg()[0], 2)


def emit(line: dict[str, Any], load: float) -> None:
    """One JSON line on stdout: the load average when the workload began first, then the workload's
    own keys, then the store it ran on."""
    print(json.dumps({"load": load, **line, "store": RUN.get("store", "orm")}), flush=True)


def engine_store() -> str:
    """The storage implementation the engine's processes use. Older engines have no such setting and
    always use the ORM."""
    from django.conf import settings

    return str(settings.STEADYFLOW.get("STORE", "orm"))


def wait_workers(queue: str, count: int, cluster: Cluster, exact: bool = False) -> None:
    """Wait until `count` RQ workers listen on `queue` (exactly `count` when `exact`: stopped ones
    unregister as they exit)."""
    import django_rq
    from rq import Worker

    conn = django_rq.get_connection("default")

    def ready() -> bool:
        n = sum(1 for w in Worker.all(connection=conn) if queue in w.queue_names())
        return n == count if exact else n >= count

    wait_until(ready, 60, f"{count} worker(s) on the {queue} queue", interval=0.1, check=cluster.check_alive)


def set_default_workers(cluster: Cluster, count: int) -> None:
    """Run exactly `count` `run_worker default` processes (labels worker-default-1..count): start the
    missing ones, stop the others."""
    running = {label for label, proc, _ in cluster.procs
               if label.startswith("worker-default-") and proc.poll() is None}
    for label in sorted(running):
        if int(label.rsplit("-", 1)[1]) > count:
            cluster.stop(label)
    for i in range(1, count + 1):
        if f"worker-default-{i}" not in running:
            cluster.manage(f"worker-default-{i}", "run_worker", "default", "--name", f"bench-default-{i}")
    wait_workers("default", count, cluster, exact=True)


class CpuMeter:
    """CPU time the worker processes (and, on PostgreSQL, their server backends) spend on a workload,
    per step: a figure that other load on the machine moves much less than the wall-clock ones."""

    def __init__(self, cluster: Cluster, prefix: str = "worker-") -> None:
        from django.db import connection

        self.cluster = cluster
        self.prefix = prefix
        # On PostgreSQL, also sample what the backends wait on (a diagnostic, on stderr only).
        db_url = RUN.get("db_url")
        self.sampler = LockSampler(db_url) if connection.vendor == "postgresql" and db_url else None

    def _backends(self) -> list[int]:
        from django.db import connection

        if connection.vendor != "postgresql":
            return []
        with connection.cursor() as cur:
            # Client backends only: an autovacuum worker on the same database (after W1-scale's
            # bulk insert) is not the workload's cost.
            cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                        "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
            return [row[0] for row in cur.fetchall()]

    def __enter__(self) -> CpuMeter:
        self.workers = self.cluster.pids(self.prefix)
        self.backends = self._backends()
        self.start = (cpu_seconds(self.workers), cpu_seconds(self.backends))
        if self.sampler:
            self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sampler:
            self.sampler.__exit__()
            note(f"PostgreSQL {self.sampler.summary()}")
        self.backends = sorted(set(self.backends) | set(self._backends()))
        self.worker_s = cpu_seconds(self.workers) - self.start[0]
        self.db_s = cpu_seconds(self.backends) - self.start[1]

    def per_step(self, steps: int) -> dict[str, float]:
        figures = {"worker_cpu_ms_per_step": round(self.worker_s / steps * 1000, 3)}
        if self.backends:
            figures["db_cpu_ms_per_step"] = round(self.db_s / steps * 1000, 3)
        note("CPU per step: " + ", ".join(f"{k.removesuffix('_ms_per_step')} {v} ms" for k, v in figures.items()))
        return figures
