"""`python -m bench`: run the workloads and print one JSON line per workload on stdout.

    W1  200 chains of 10 no-op python steps: steps/s (all started at once) and the serial per-step
        overhead in ms (chains one at a time through one worker)
    W2  50 workflows of one step -> 20 parallel steps -> join: workflows/s
    W3  300 instances of one `llm` step against a local OpenAI-compatible server that answers after
        2.0 s: wall time from the first start to the last completion
    W4  "agent transcript": a 100-step loop whose python step adds 4 KB of incompressible text to the
        context each visit, alone and 50 at once: first/last-10 step times, WAL and table bytes
        (bench/transcript.py)
    live  bench/live.py's workload, when that module exists
    workers   W1's 200 chains with 1, 2 and 4 `default` worker processes: steps/s
    W1-scale  (opt-in) W1 with 2,000 chains, and W1 again over 100,000 seeded finished instances:
              steps/s against a 200-chain run made just before (target: within 10%)

`--only W1-scale,workers` runs the scale lines alone, `--only all` everything. Every line starts
with "load" (the 1-minute load average when the workload began) and carries "store" (the engine's
settings.STEADYFLOW["STORE"]; --store sets STEADYFLOW_STORE for every process).

Everything runs on a throwaway database (PostgreSQL when DATABASE_URL points there, else SQLite),
a private Redis and real worker processes: two `run_worker default`, `run_worker ai` for W3 and
`run_scheduler`. Progress goes to stderr. Figures are printed, never asserted (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness import ROOT, Cluster, make_database, note, production_keys, redact, wait_until
from bench.measure import RUN, CpuMeter, emit, engine_store, load_average, wait_workers

DEFAULT_WORKLOADS = ("W1", "W2", "W3", "W4", "live", "workers")
# Opt-in: 2,000 chains and seeding 100,000 instances add 2.5-8 minutes here, depending on the load.
EXTRA_WORKLOADS = ("W1-scale",)
WORKLOADS = DEFAULT_WORKLOADS + EXTRA_WORKLOADS
LLM_DELAY_S = 2.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(DEFAULT_WORKLOADS),
                        help=f"comma-separated workloads to run, or `all` (default: {','.join(DEFAULT_WORKLOADS)}; "
                             f"opt-in: {', '.join(EXTRA_WORKLOADS)})")
    parser.add_argument("--store", choices=("sql", "orm"),
                        help="the engine's storage implementation: sets STEADYFLOW_STORE for every process "
                             "(default: the environment's, else the engine's default)")
    parser.add_argument("--workers", type=int, default=2, help="`default` worker processes (default 2)")
    parser.add_argument("--worker-counts", default="1,2,4",
                        help="`workers`: the pool sizes to run W1 with (default 1,2,4)")
    parser.add_argument("--chains", type=int, default=200, help="W1 chains (default 200)")
    parser.add_argument("--scale-chains", type=int, default=2000,
                        help="W1-scale: the large run's chains (default 2000)")
    parser.add_argument("--history", type=int, default=100_000,
                        help="W1-scale: finished instances seeded before the last run (default 100000)")
    parser.add_argument("--length", type=int, default=10, help="W1 steps per chain (default 10)")
    parser.add_argument("--serial", type=int, default=30, help="W1 chains run one at a time (default 30)")
    parser.add_argument("--fanout", type=int, default=50, help="W2 workflows (default 50)")
    parser.add_argument("--width", type=int, default=20, help="W2 parallel steps (default 20)")
    parser.add_argument("--llm", type=int, default=300, help="W3 instances (default 300)")
    parser.add_argument("--transcripts", type=int, default=50,
                        help="W4 instances run at once after the one alone (default 50; 0 skips)")
    parser.add_argument("--transcript-steps", type=int, default=100, help="W4 steps per instance (default 100)")
    parser.add_argument("--transcript-bytes", type=int, default=4000,
                        help="W4 bytes of text each step adds to the context (default 4000)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs and print where")
    parser.add_argument("--profile-workers", action="store_true",
                        help="run the workers under cProfile; their .prof files stay in the logs directory")
    parser.add_argument("--pg-options", default="",
                        help="extra PostgreSQL connection OPTIONS (JSON) for every process, to measure a "
                             "proposal, e.g. '{\"server_side_binding\": true, \"prepare_threshold\": 5}'")
    parser.add_argument("--setup-sql", default="",
                        help="SQL run on the throwaway database after migrating it, to measure a schema "
                             "proposal without a migration, e.g. 'ALTER TABLE workflows_event DROP CONSTRAINT ...'")
    args = parser.parse_args(argv)
    if args.pg_options:
        try:
            json.loads(args.pg_options)
        except ValueError as exc:
            parser.error(f"--pg-options is not JSON: {exc}")
    args.only = [w.strip() for w in args.only.split(",") if w.strip()]
    if args.only == ["all"]:
        args.only = list(WORKLOADS)
    try:
        args.worker_counts = [int(n) for n in args.worker_counts.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--worker-counts is not a list of integers: {args.worker_counts!r}")
    if not args.worker_counts or min(args.worker_counts) < 1:
        parser.error("--worker-counts needs pool sizes of at least 1")
    unknown = set(args.only) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(sorted(unknown))} (choose from {', '.join(WORKLOADS)})")
    return args


def _terminate(signum: int, frame: Any) -> None:
    # SIGTERM: unwind like Ctrl-C so the finally blocks stop every process and drop the database.
    note("terminated: stopping")
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C must unwind too, even when started from a shell that ignores SIGINT in background jobs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tmpdir, db = make_database(os.environ.get("DATABASE_URL"))
    RUN["db_url"] = db.url
    cluster = Cluster(env={}, logdir=Path(tmpdir), profile_workers=args.profile_workers)
    failed = False
    try:
        redis_url = os.environ.get("BENCH_REDIS_URL") or cluster.start_redis()
        env = dict(os.environ)
        env.update({
            "DATABASE_URL": db.url,
            "REDIS_URL": redis_url,
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
            "DJANGO_SETTINGS_MODULE": "bench.settings" if args.pg_options else "dashboard.settings",
            "BENCH_PG_OPTIONS": args.pg_options,
            **production_keys(),
        })
        if args.store:
            env["STEADYFLOW_STORE"] = args.store
        cluster.env = env
        note(f"database: {db.kind} ({redact(db.url)}), redis: {redis_url}, logs: {tmpdir}"
             + (f", connection OPTIONS +{args.pg_options}" if args.pg_options else ""))
        db.migrate(env)
        if args.setup_sql:
            db.execute(args.setup_sql)
            note(f"setup SQL: {args.setup_sql}")
        # This process too: Django must read the throwaway DATABASE_URL, never the developer's.
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        RUN["store"] = engine_store()
        if args.store and RUN["store"] != args.store:
            note(f"--store {args.store} asked, but the engine's settings say {RUN['store']!r} (an engine "
                 "without settings.STEADYFLOW['STORE'] ignores STEADYFLOW_STORE): the lines say what ran")
        note(f"store: {RUN['store']}")
        failed = run(args, cluster, db.kind)
    except KeyboardInterrupt:
        note("interrupted: stopping")
        failed = True
    except Exception:  # noqa: BLE001 - report, then clean up below
        traceback.print_exc(file=sys.stderr)
        failed = True
    finally:
        cluster.stop()
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        db.drop()
        if args.keep_logs or failed or args.profile_workers:
            note(f"process logs kept in {tmpdir}")
        else:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return 1 if failed else 0


def run(args: argparse.Namespace, cluster: Cluster, db_kind: str) -> bool:
    """Run the chosen workloads. True when one of them failed."""
    from bench import workloads as wl
    from bench.profile import commit_latency_ms
    from bench.storage import WalMeter

    failed = False
    check = cluster.check_alive
    # Context for reading the figures: on a shared machine both vary a lot from minute to minute.
    latency = commit_latency_ms()
    note(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
         + (f"; a one-row durable UPDATE + COMMIT takes {latency} ms (median)" if latency is not None else ""))
    cluster.manage("scheduler", "run_scheduler")
    cluster.manage("worker-default-1", "run_worker", "default", "--name", "bench-default-1")
    wait_workers("default", 1, cluster)
    chain = wl.version_for("bench-chain", wl.chain_graph(args.length))

    serial: dict[str, Any] | None = None
    w1_load = load_average()
    if "W1" in args.only:
        try:
            wl.w1_serial(chain, 3, args.length, check)  # warm-up: graph cache, connections, plans
            serial = wl.w1_serial(chain, args.serial, args.length, check)
        except Exception:  # noqa: BLE001 - one workload failing must not hide the others
            traceback.print_exc(file=sys.stderr)
            failed = True
    for i in range(2, args.workers + 1):
        cluster.manage(f"worker-default-{i}", "run_worker", "default", "--name", f"bench-default-{i}")
    wait_workers("default", args.workers, cluster)

    if serial is not None:
        try:
            wl.w1_throughput(chain, max(args.workers * 4, 10), check)  # warm the other workers
            with CpuMeter(cluster) as cpu, WalMeter() as wal:
                through = wl.w1_throughput(chain, args.chains, check)
            emit({"workload": "W1", "steps_per_s": through["steps_per_s"], "per_step_ms": serial["per_step_ms"],
                  "db": db_kind, "workers": args.workers, "chains": args.chains, "steps": through["steps"],
                  "wall_s": through["wall_s"], "completed": through["completed"], **cpu.per_step(through["steps"]),
                  **wal.per_step(through["steps"])},
                 w1_load)
            failed |= through["completed"] != args.chains
        except Exception:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            failed = True

    if "W2" in args.only:
        try:
            load = load_average()
            fan = wl.version_for("bench-fanout", wl.fanout_graph(args.width))
            with CpuMeter(cluster) as cpu:
                w2 = wl.w2_fanout(fan, args.fanout, check)
            emit({"workload": "W2", "workflows_per_s": w2["workflows_per_s"], "db": db_kind,
                  "workers": args.workers, "workflows": args.fanout, "steps": w2["steps"],
                  "wall_s": w2["wall_s"], "completed": w2["completed"], **cpu.per_step(w2["steps"])}, load)
            failed |= w2["completed"] != args.fanout
        except Exception:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            failed = True

    if "W3" in args.only:
        try:
            failed |= not run_w3(args, cluster, db_kind)
        except Exception:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            failed = True

    if "W4" in args.only:
        from bench.transcript import run_w4

        try:
            failed |= not run_w4(args, cluster, db_kind, check)
        except Exception:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            failed = True

    if "live" in args.only:
        failed |= not run_live()

    # Last, and W1-scale after workers: the seeded history stays in the database.
    from bench import scale

    for name, workload in (("workers", scale.run_workers), ("W1-scale", scale.run_w1_scale)):
        if name in args.only:
            try:
                failed |= not workload(args, cluster, chain, db_kind, check)
            except Exception:  # noqa: BLE001
                traceback.print_exc(file=sys.stderr)
                failed = True
    return failed


def run_w3(args: argparse.Namespace, cluster: Cluster, db_kind: str) -> bool:
    from bench import workloads as wl

    if importlib.util.find_spec("tests.support.llm_server") is None:
        note("W3 skipped: tests/support/llm_server.py (the local OpenAI-compatible server) is not there yet")
        return True
    if importlib.util.find_spec("workflows.workers.aiworker") is None:
        note("W3 skipped: workflows/workers/aiworker.py (the ai queue's consumer) is not there yet")
        return True
    base_url = start_llm_server(cluster, LLM_DELAY_S)
    cluster.manage("worker-ai", "run_worker", "ai", "--name", "bench-ai",
                   env={"STEADYFLOW_LLM_BASE_URL": base_url})
    wait_workers("ai", 1, cluster)
    load = load_average()
    version = wl.version_for("bench-llm", wl.llm_graph())
    wl.w3_llm(version, 2, cluster.check_alive)  # warm-up: the consumer's HTTP session and DB connection
    time.sleep(0.2)
    with CpuMeter(cluster, prefix="worker-ai") as cpu:
        w3 = wl.w3_llm(version, args.llm, cluster.check_alive)
    emit({"workload": "W3", "wall_s": w3["wall_s"], "db": db_kind, "instances": args.llm,
          "llm_delay_s": LLM_DELAY_S, "completed": w3["completed"], **cpu.per_step(args.llm)}, load)
    return w3["completed"] == args.llm


def start_llm_server(cluster: Cluster, delay: float) -> str:
    """tests/support/llm_server.py as a process of this run (off this process's GIL); returns its
    base URL, which the server prints on its first line."""
    cluster.spawn("llm-server", [sys.executable, "-m", "tests.support.llm_server", "--port", "0",
                                 "--delay", str(delay)])
    log = cluster.logdir / "llm-server.log"

    def listening() -> str | None:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("listening on "):
                return line.removeprefix("listening on ").strip()
        return None

    url: str = wait_until(listening, 20, "the LLM test server to listen", check=cluster.check_alive)
    note(f"LLM test server at {url}, answering after {delay:g} s")
    return url


def run_live() -> bool:
    if importlib.util.find_spec("bench.live") is None:
        note("live skipped: bench/live.py is not there yet")
        return True
    try:
        from bench import live

        if not live.CHROMIUM.exists():  # as the browser tests do (tests/e2e/conftest.py): skipped, said why
            note(f"live skipped: {live.CHROMIUM} is missing (apt-get install -y chromium)")
            return True
        load = load_average()
        emit(live.run(), load)
        return True
    except Exception:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
