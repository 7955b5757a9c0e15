"""`python -m bench.breaker_record`: the cost of the circuit breaker's record() per LLM call.

Times `calls` record() calls (with --with-allow, allow() + record()) and a final flush (when the
breaker has one) on the database DATABASE_URL names, from 1 thread and from several (the ai
consumer records from its database threads). Prints one JSON line per run: wall and process CPU
in ms, per call and in total. Measurement only, nothing asserted (docs/BENCHMARKS.md). It writes
one BreakerState row (`bench:breaker_record`) and deletes it at the end: use a scratch database.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.breaker_record", description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", default="1,4", help="comma-separated thread counts (default 1,4)")
    parser.add_argument("--with-allow", action="store_true", help="time allow() + record() per call")
    parser.add_argument("--failure-every", type=int, default=0,
                        help="every Nth call fails (default 0: all succeed)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, connections

    from workflows.adapters import breakers
    from workflows.models import BreakerState

    call_command("migrate", verbosity=0)
    key = "bench:breaker_record"
    for threads in [int(t) for t in args.threads.split(",")]:
        BreakerState.objects.filter(key=key).delete()
        gate = breakers.DatabaseBreaker(key)
        gate.record(True)  # warm up: the row, the connection
        flush = getattr(breakers, "flush", None)
        if flush:
            flush()
        per_thread = args.calls // threads

        def work(gate: breakers.DatabaseBreaker = gate, n: int = per_thread) -> None:
            for i in range(n):
                if args.with_allow:
                    gate.allow()
                gate.record(not (args.failure_every and (i + 1) % args.failure_every == 0))
            connections.close_all()

        cpu0, wall0 = time.process_time(), time.perf_counter()
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        if flush:
            flush()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        row = BreakerState.objects.get(key=key)
        calls = per_thread * threads
        counted = sum(c for c, _ in row.buckets.values()) - 1
        print(json.dumps({"db": connection.vendor, "allow": args.with_allow, "threads": threads, "calls": calls,
                          "counted": counted,
                          "state": row.state, "wall_ms": round(wall * 1000, 1),
                          "cpu_ms": round(cpu * 1000, 1), "wall_ms_per_call": round(wall * 1000 / calls, 3),
                          "cpu_ms_per_call": round(cpu * 1000 / calls, 3)}), flush=True)
    BreakerState.objects.filter(key=key).delete()


if __name__ == "__main__":
    main()
