"""A quick probe of the agent-transcript workload (issue 18): one instance of 100 python steps, each
adding a new 4 KB key `note_<n>` of incompressible text to the context, run in this process through
the real job path (workflows.scheduler.inprocess.drain). Prints per-step wall for the first and last 10 steps
and, on PostgreSQL, WAL bytes per step. Not `make bench` (bench/ owns that); run it with
DATABASE_URL pointing at a scratch database and REDIS_URL set (scripts/devrun.py with-redis).

    python -m bench.w4_probe [steps] [bytes]
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from workflows import runtime
    from workflows.authoring.definitions import save_version
    from workflows.engine.functions import FunctionCall, FunctionResult, register_function
    from workflows.scheduler import inprocess

    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    marks: list[float] = []

    @register_function("probe.note")
    def note(call: FunctionCall) -> FunctionResult:
        marks.append(time.perf_counter())
        text = secrets.token_hex(size // 2)
        return FunctionResult(output={"note": text}, context={f"note_{call.args['n']}": text})

    ids = ["start", *(f"s{i}" for i in range(1, steps + 1)), "end"]
    nodes = [{"id": "start", "type": "start"},
             *({"id": f"s{i}", "type": "python", "config": {"function": "probe.note", "args": {"n": i}}}
               for i in range(1, steps + 1)), {"id": "end", "type": "end"}]
    graph = {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
             "settings": {"max_transitions": 10000, "ttl_s": 3600}}
    version = save_version(f"probe-{uuid.uuid4().hex[:8]}", graph)
    pg = connection.vendor == "postgresql"

    def lsn() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn() - '0/0'")
            return int(cursor.fetchone()[0])

    def lsn_text() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text, (SELECT oid FROM pg_database WHERE datname = "
                           "current_database())")
            row = cursor.fetchone()
            return f"{row[0]} {row[1]}"

    if pg:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    before = lsn() if pg else 0
    start_lsn = lsn_text() if pg else ""
    inst = runtime.start_instance(version, {"topic": "probe"})
    t0 = time.perf_counter()
    inprocess.drain(("default",))
    wall = time.perf_counter() - t0
    after = lsn() if pg else 0
    end_lsn = lsn_text() if pg else ""
    inst.refresh_from_db()
    gaps = [(b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)]
    first = sum(gaps[:10]) / 10
    last = sum(gaps[-10:]) / 10
    print(json.dumps({
        "db": connection.vendor, "store": os.environ.get("STEADYFLOW_STORE", "sql"), "status": str(inst.status),
        "steps": len(marks), "keys": len(inst.context), "wall_s": round(wall, 2),
        "first10_ms": round(first, 2), "last10_ms": round(last, 2), "ratio": round(last / first, 2),
        "wal_per_step": round((after - before) / max(1, len(marks))) if pg else None,
        "load": os.getloadavg()[0], "wal_range": f"{start_lsn} {end_lsn}"}))


if __name__ == "__main__":
    main()
