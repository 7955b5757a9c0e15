"""`python -m bench.profile`: where one step's time goes on the hot path, in-process.

Runs chains of no-op python steps serially through the runtime's own functions (claim_step ->
run_claimed -> finish_step with inline continuation, exactly what `run_step` does in a worker) on a
throwaway database, and reports per step and per phase:
- the SQL statements (grouped by shape) and, on PostgreSQL, the network round trips (psycopg 3 sends
  BEGIN and COMMIT as round trips of their own) and the time inside psycopg's wait (sending, the
  server's work and fsync, receiving);
- wall time, so wall - wait = the Python around it (Django ORM, runtime, adaptation) per step;
- with --cprofile, the top functions by cumulative and own time (a separate run: cProfile slows
  Python down, not the server).

No worker processes: the jobs the runtime enqueues after commit go to a private Redis and are
never consumed. DATABASE_URL chooses PostgreSQL or SQLite as for `python -m bench`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import ROOT, Cluster, make_database, note, production_keys

PHASES = ("claim", "build+run", "finish")


def shape(sql: str) -> str:
    """A statement with its literals and column lists removed, short enough to read in a table."""
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"%s|\b\d+(\.\d+)?\b", "?", sql)
    sql = re.sub(r'"workflows_\w+"\."(\w+)"', r"\1", sql)
    sql = re.sub(r"\s+", " ", sql).strip()
    verb = sql.split(" ", 1)[0].upper()
    table = re.search(r'(?:FROM|INTO|UPDATE) "?(\w+)"?', sql)
    where = re.search(r"WHERE (.{0,70})", sql)
    name = table.group(1).removeprefix("workflows_") if table else ""
    return f"{verb} {name} {('WHERE ' + where.group(1)) if where else ''}".strip()


@dataclass
class PhaseStats:
    seconds: list[float] = field(default_factory=list)
    wait_s: float = 0.0
    round_trips: int = 0
    statements: Counter[str] = field(default_factory=Counter)
    statement_s: dict[str, float] = field(default_factory=dict)
    statement_count: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    commit_s: float = 0.0


class Probe:
    """Counts what one phase sends to the database: statements (Django's execute_wrapper) and, on
    PostgreSQL, every request/response cycle with the time spent in it (psycopg's Connection.wait,
    which each query, BEGIN and COMMIT goes through)."""

    def __init__(self) -> None:
        self.current: PhaseStats | None = None
        self._patched: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        from django.db import connection

        connection.execute_wrappers.append(self._wrapper)
        if connection.vendor != "postgresql":
            return
        import psycopg
        from psycopg._connection_base import BaseConnection

        probe = self
        wait, exec_command = psycopg.Connection.wait, BaseConnection._exec_command

        def timed_wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return wait(conn, gen, *args, **kwargs)
            finally:
                if probe.current is not None:
                    spent = time.perf_counter() - t
                    probe.current.wait_s += spent
                    if "commit" in getattr(gen, "__qualname__", ""):
                        probe.current.commit_s += spent

        def counted_command(conn: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            # BEGIN, COMMIT, ROLLBACK, SAVEPOINT: psycopg 3 sends each as a round trip of its own.
            if probe.current is not None:
                probe.current.round_trips += 1
                name = command.decode() if isinstance(command, bytes) else str(command)
                probe.current.commands[name.split(" ", 1)[0]] += 1
            return exec_command(conn, command, *args, **kwargs)

        psycopg.Connection.wait = timed_wait  # type: ignore[method-assign,assignment]
        BaseConnection._exec_command = counted_command  # type: ignore[method-assign,assignment]
        self._patched = [(psycopg.Connection, "wait", wait), (BaseConnection, "_exec_command", exec_command)]

    def uninstall(self) -> None:
        from django.db import connection

        connection.execute_wrappers.remove(self._wrapper)
        for cls, name, original in self._patched:
            setattr(cls, name, original)
        self._patched = []

    def _wrapper(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        current = self.current
        if current is None:
            return execute(sql, params, many, context)
        key = shape(sql)
        current.statements[key] += 1
        current.statement_count += 1
        current.round_trips += 1
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            current.statement_s[key] = current.statement_s.get(key, 0.0) + time.perf_counter() - t

    @contextmanager
    def phase(self, stats: PhaseStats | None) -> Iterator[None]:
        self.current = stats
        t = time.perf_counter()
        try:
            yield
        finally:
            if stats is not None:
                stats.seconds.append(time.perf_counter() - t)
            self.current = None


def run_chains(chains: int, length: int, probe: Probe, profiler: cProfile.Profile | None = None,
               slug: str = "profile-chain") -> dict[str, Any]:
    from bench import workloads as wl
    from workflows import runtime
    from workflows.models import StepRun

    version = wl.version_for(slug, wl.chain_graph(length))
    worker = "profile:1"
    stats = {name: PhaseStats() for name in PHASES}
    start = PhaseStats()
    steps = 0
    wall = 0.0
    for i in range(chains + 2):
        measuring = i >= 2  # two warm-up chains: graph cache, prepared plans, imports

        def pick(name: str, measuring: bool = measuring) -> PhaseStats | None:
            return stats[name] if measuring else None

        with probe.phase(start if measuring else None):
            inst = runtime.start_instance(version, {"n": i})
        first = StepRun.objects.get(instance=inst, node_id="s1").pk
        if profiler and measuring:
            profiler.enable()
        t_chain = time.perf_counter()
        with probe.phase(pick("claim")):
            claim = runtime.claim_step(first, worker)
        while claim is not None:
            with probe.phase(pick("build+run")):
                outcome = runtime.run_claimed(claim)
            if outcome.error is not None:
                raise RuntimeError(f"step failed: {outcome.error.message}")
            with probe.phase(pick("finish")):
                claim = runtime.finish_step(claim, outcome, allow_inline=True)
            steps += measuring
        if measuring:
            wall += time.perf_counter() - t_chain
        if profiler and measuring:
            profiler.disable()
    inst.refresh_from_db()
    if inst.status != "completed":
        raise RuntimeError(f"the last chain ended {inst.status}: {inst.error}")
    return {"chains": chains, "length": length, "steps": steps, "wall_s": wall, "phases": stats, "start": start}


def print_report(result: dict[str, Any], kind: str) -> None:
    steps = result["steps"]
    phases: dict[str, PhaseStats] = result["phases"]
    wait = sum(p.wait_s for p in phases.values())
    trips = sum(p.round_trips for p in phases.values())
    statements = sum(p.statement_count for p in phases.values())
    ms = result["wall_s"] / steps * 1000
    print(f"# Hot path on {kind}: {result['chains']} chains x {result['length']} no-op steps, serial, in-process")
    print("(claim once per chain, then run + finish with inline continuation, as run_step does)\n")
    print(f"wall per step                  {ms:7.3f} ms")
    if wait:
        print(f"  inside psycopg's wait        {wait / steps * 1000:7.3f} ms  (sending, server, fsync, receiving: "
              f"{trips / steps:.2f} round trips per step)")
        print(f"  outside it                   {ms - wait / steps * 1000:7.3f} ms  (Django ORM, runtime, psycopg "
              "adaptation)")
    print(f"SQL statements per step        {statements / steps:7.2f}")
    _print_phase("start_instance (per call)", result["start"], len(result["start"].seconds))
    for name, phase in phases.items():
        _print_phase(f"{name} (per step)", phase, steps)


def _print_phase(title: str, phase: PhaseStats, per: int) -> None:
    calls = len(phase.seconds)
    extra = (f", {phase.round_trips / calls:.2f} round trips, {phase.wait_s / calls * 1000:.3f} ms in psycopg's "
             "wait" if phase.wait_s else "")
    print(f"\n## {title}: {calls} calls, median {statistics.median(phase.seconds) * 1000:.3f} ms, "
          f"{phase.statement_count / calls:.2f} statements{extra} per call")
    if not phase.statements:
        return
    # "ms each": Django's execute() of the statement (ORM compiler excluded), psycopg and the server.
    # psycopg 3 sends BEGIN just before the first statement of a transaction: its time is in that one.
    print(f"  {'count':>8}  {'ms each':>8}")
    for statement, n in phase.statements.most_common():
        print(f"  {n / per:8.2f}  {phase.statement_s[statement] / n * 1000:8.3f}  {statement}")
    for command, n in sorted(phase.commands.items()):
        each = f"{phase.commit_s / n * 1000:8.3f}" if command == "COMMIT" else f"{'':>8}"
        print(f"  {n / per:8.2f}  {each}  {command}")


def commit_latency_ms(samples: int = 200) -> float | None:
    """Median time of a one-row durable UPDATE + COMMIT on this database now: the floor under any
    serial per-step figure (fsync latency varies a lot on a shared machine)."""
    from django.db import connection, transaction

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS bench_probe (id int PRIMARY KEY, v int)")
        cur.execute("INSERT INTO bench_probe VALUES (1, 0) ON CONFLICT DO NOTHING")
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("UPDATE bench_probe SET v = v + 1 WHERE id = 1")
        times.append(time.perf_counter() - t)
    with connection.cursor() as cur:
        cur.execute("DROP TABLE bench_probe")
    return round(statistics.median(times) * 1000, 3)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--cprofile", action="store_true", help="also print cProfile's top functions")
    parser.add_argument("--pg-options", type=json.loads, default=None,
                        help='extra OPTIONS for the PostgreSQL connection, JSON, e.g. '
                             '\'{"server_side_binding": true, "prepare_threshold": 5}\'')
    args = parser.parse_args(argv)
    tmpdir, db = make_database(os.environ.get("DATABASE_URL"))
    cluster = Cluster(env={}, logdir=Path(tmpdir))
    try:
        redis_url = os.environ.get("BENCH_REDIS_URL") or cluster.start_redis()
        env = {**os.environ, "DATABASE_URL": db.url, "REDIS_URL": redis_url, "LOG_LEVEL": "WARNING",
               "DJANGO_SETTINGS_MODULE": "dashboard.settings", **production_keys()}
        db.migrate(env)
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        if args.pg_options:
            from django.db import connection

            # Before the first query: the connection reads its OPTIONS when it opens.
            connection.settings_dict["OPTIONS"].update(args.pg_options)
            note(f"connection OPTIONS {connection.settings_dict['OPTIONS']}")
        latency = commit_latency_ms()
        if latency is not None:
            note(f"a one-row durable UPDATE + COMMIT takes {latency} ms (median) on this server right now")
        probe = Probe()
        probe.install()
        try:
            print_report(run_chains(args.chains, args.length, probe), db.kind)
        finally:
            probe.uninstall()
        if args.cprofile:
            profiler = cProfile.Profile()
            run_chains(args.chains, args.length, Probe(), profiler, slug="profile-chain-cprofile")
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
            print("\n## cProfile (measured chains only; cProfile inflates Python time)")
            print(out.getvalue())
    finally:
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        cluster.stop()
        db.drop()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
