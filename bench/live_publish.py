"""Worker CPU per live-view publish: `python -m bench.live_publish [--calls 10000]`.

Calls workflows/live/notices.py's `publish_commit` (what a worker calls after each commit) and `publish` (the
same from a commit's event dicts) CALLS times each against the configured REDIS_URL, and prints the
process CPU time (time.process_time: every thread of this process) per call as one JSON line. Nothing
needs to listen; PUBLISH costs the publisher the same either way.

    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python -m bench.live_publish
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

# A finished step's commit: the three events a worker publishes most often.
AT = "2026-12-01T12:00:00.123456+00:00"


def commit_messages(i: int) -> list[dict[str, Any]]:
    return [
        {"instance": 42, "seq": 3 * i + 1, "type": "step_succeeded", "node": "s3", "step": 1000 + i,
         "payload": {"visit": 1, "attempt": 1, "duration_ms": 0.1}, "at": AT},
        {"instance": 42, "seq": 3 * i + 2, "type": "edges_taken", "node": "s3", "step": 1000 + i,
         "payload": {"edges": [["s3", "s4"]]}, "at": AT},
        {"instance": 42, "seq": 3 * i + 3, "type": "step_queued", "node": "s4", "step": 1001 + i,
         "payload": {"visit": 1, "queue": "default"}, "at": AT},
    ]


def cpu_us_per_call(calls: int, call: Callable[[int], None]) -> float:
    call(0)  # connect first: a worker pays that once
    start = time.process_time()
    for i in range(calls):
        call(i)
    return round((time.process_time() - start) / calls * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from workflows.live import notices as live

    messages = [commit_messages(i) for i in range(args.calls)]
    result = {
        "workload": "live_publish", "calls": args.calls,
        "publish_commit_cpu_us": cpu_us_per_call(args.calls, lambda i: live.publish_commit(42, 3 * i + 1, 3 * i + 3)),
        "publish_cpu_us": cpu_us_per_call(args.calls, lambda i: live.publish(messages[i])),
        "load_avg": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
