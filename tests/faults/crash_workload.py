"""The client side of the database-crash test, run as its own process (`manage.py shell -c`) against
the private cluster: save a chain of three side-effecting python steps with an LLM call (the `ai`
consumer's) between the second and third, then start COUNT instances
one every INTERVAL_S seconds, each under its own idempotency key. A start that meets the database
away is retried with the same key (as an API client would), so a start whose COMMIT landed but whose
answer was lost is not started twice. Prints `version <id>` then `started <n> <instance id>`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

import tests.faults.functions  # noqa: F401 - registers faults.* functions for save-time validation

T = TypeVar("T")


def graph(sink: str, seconds: float) -> dict[str, object]:
    retry = {"max_attempts": 6, "backoff_s": 0.2, "max_backoff_s": 1.0}
    steps = [{"id": name, "type": "python", "retry": retry,
              "config": {"function": "faults.effect", "args": {"sink": sink, "seconds": seconds}}}
             for name in ("a", "b", "c")]
    # An LLM call between b and c, run by the `ai` consumer (scripted: no network), in flight as long as
    # the python steps, so the fault also meets the consumer's claims, calls and commits.
    think = {"id": "think", "type": "llm", "retry": retry,
             "config": {"provider": "scripted", "prompt": "x", "script": [{"text": "ok", "delay_s": seconds}]}}
    steps.insert(2, think)
    nodes = [{"id": "start", "type": "start"}, *steps, {"id": "end", "type": "end"}]
    ids = [n["id"] for n in nodes]
    return {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]}


def retrying(what: str, fn: Callable[[], T]) -> T:
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            print(f"retrying {what}: {type(exc).__name__}", flush=True)
            connection.close()
            time.sleep(0.2)


def main() -> None:
    from workflows import runtime
    from workflows.authoring.definitions import save_version

    count = int(os.environ["CRASH_COUNT"])
    interval = float(os.environ["CRASH_INTERVAL_S"])
    version = save_version("crash-chain", graph(os.environ["CRASH_SINK"], float(os.environ["CRASH_STEP_S"])))
    print(f"version {version.pk}", flush=True)
    for n in range(count):
        instance = retrying(f"start {n}", lambda n=n: runtime.start_instance(version, {"n": n},
                                                                              idempotency_key=f"crash-{n}"))
        print(f"started {n} {instance.pk}", flush=True)
        time.sleep(interval)
    sys.stdout.flush()
