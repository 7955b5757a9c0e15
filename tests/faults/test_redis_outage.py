"""Redis goes away and comes back: workers, the ai consumer and the scheduler stay up, say so once per
outage, and serve again when it returns (workflows/workers/redis_outage.py). Each test has its own
redis-server (private_redis); it restarts empty (no persistence), so the reconciler re-dispatches
whatever was queued from the database."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain, wait_for
from tests.faults.conftest import (
    check_effects,
    check_history,
    http,
    py,
    record,
    start,
    statuses,
    wait_all,
)
from workflows.models import StepRun

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

DOWN = "Redis unreachable"
BACK = "Redis reachable again"
# What RQ logs on each retry of its own loops: routed to the once-per-outage line instead.
RQ_PER_RETRY = "could not connect to Redis instance"
# How long Redis stays down once every process has noticed (each retries with backoff meanwhile).
HOLD_S = 3.0
QUIET_BREAKERS = {"STEADYFLOW_BREAKER_MIN_CALLS": "100000"}


def scripted(node_id: str, text: str = "ok") -> dict[str, Any]:
    """An llm node answered offline (the ai queue's consumer runs it)."""
    return {"id": node_id, "type": "llm",
            "config": {"provider": "scripted", "prompt": "x", "script": [{"text": text}]}}


def log_of(processes: Any, proc: subprocess.Popen[bytes]) -> str:
    index = processes.procs.index(proc)
    [path] = [p for p in Path(processes.tmp_path).glob(f"*-{index}.log")]
    return path.read_text(errors="replace")


def outage(private_redis: Any, processes: Any, procs: list[subprocess.Popen[bytes]]) -> float:
    """Stop Redis until every process in `procs` has noticed, HOLD_S more, then start it again.
    Returns how long it was down."""
    private_redis.stop()
    began = time.monotonic()
    # (A process that exits instead fails check_survived.)
    wait_for(lambda: all(DOWN in log_of(processes, p) or p.poll() is not None for p in procs), timeout=60,
             message="every process to notice the outage")
    time.sleep(HOLD_S)  # the outage goes on: retries back off meanwhile (not an assertion)
    private_redis.start()
    return time.monotonic() - began


def check_survived(processes: Any, procs: list[subprocess.Popen[bytes]], outages: int = 1) -> dict[str, int]:
    """Every process is alive, said `Redis unreachable` once per outage and that it is back once,
    and never logged RQ's per-retry error. Returns the log lines counted, for the report."""
    counts = {"down_lines": 0, "back_lines": 0}
    # The work may be done before a process backing off has tried again (up to 5 s).
    wait_for(lambda: all(log_of(processes, p).count(BACK) >= outages or p.poll() is not None for p in procs),
             timeout=30, message="every process to find Redis back")
    for proc in procs:
        assert proc.poll() is None, f"{proc.args} exited ({proc.returncode}):\n{log_of(processes, proc)[-3000:]}"
        text = log_of(processes, proc)
        assert text.count(DOWN) == outages, f"{proc.args}: {text.count(DOWN)} outage lines:\n{text[-3000:]}"
        assert text.count(BACK) == outages, f"{proc.args}: {text.count(BACK)} lines saying Redis is back"
        assert RQ_PER_RETRY not in text, text[-3000:]
        counts["down_lines"] += text.count(DOWN)
        counts["back_lines"] += text.count(BACK)
    return counts


def test_processes_ride_out_an_outage_while_idle(processes, sink, private_redis):
    procs = [processes.worker("io"), processes.worker("default"),
             processes.worker("ai", env=QUIET_BREAKERS), processes.scheduler()]
    client = private_redis.client()
    wait_for(lambda: client.scard("rq:workers") == 3, message="the three workers to register")

    down_s = outage(private_redis, processes, procs)
    back_at = time.monotonic()
    instances = start(chain(http("a", sink), py("b", "faults.effect", {"sink": sink.url()}),
                            scripted("c")), count=2)
    wait_all(instances, "completed")
    served_s = time.monotonic() - back_at
    counts = check_survived(processes, procs)
    # Redis came back empty: each worker wrote its record again.
    wait_for(lambda: client.scard("rq:workers") == 3, message="the workers to register again")
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    record("Redis stopped while the processes idle", statuses=statuses(instances),
           redis_down_s=round(down_s, 1), steps=sum(h.steps for h in histories), **effects, **counts,
           served_after_redis_back_s=round(served_s, 2))


def test_processes_ride_out_an_outage_mid_chain(processes, sink, private_redis):
    """Redis stops while chains run: steps in flight finish and commit (the database is up), their
    successors' enqueue and RQ's bookkeeping fail; the workers wait, and the chains complete."""
    steps = [http(f"s{n}", sink, delay=0.2) if n % 2 else py(f"s{n}", "faults.effect", {"sink": sink.url()})
             for n in range(10)]
    steps.append(scripted("ask"))
    instances = start(chain(*steps, settings={"max_transitions": 50}), count=4)
    procs = [processes.worker("io"), processes.worker("default"),
             processes.worker("ai", env=QUIET_BREAKERS), processes.scheduler()]
    done = StepRun.objects.filter(instance__in=instances, status="succeeded", node_id__startswith="s")
    wait_for(lambda: done.count() >= 6, timeout=60, message="the chains to be under way")

    down_s = outage(private_redis, processes, procs)
    back_at = time.monotonic()
    wait_all(instances, "completed")
    recovery = time.monotonic() - back_at
    counts = check_survived(processes, procs)
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    record("Redis stopped mid-chain", instances=len(instances), statuses=statuses(instances),
           redis_down_s=round(down_s, 1), steps=sum(h.steps for h in histories), **effects, **counts,
           completed_after_redis_back_s=round(recovery, 2))


def test_processes_started_while_redis_is_down_serve_when_it_comes(processes, sink, private_redis):
    private_redis.stop()
    procs = [processes.worker("io"), processes.worker("ai", env=QUIET_BREAKERS), processes.scheduler()]
    wait_for(lambda: all(DOWN in log_of(processes, p) or p.poll() is not None for p in procs), timeout=60,
             message="every process to find Redis down")
    time.sleep(HOLD_S)  # still down: the processes keep retrying (not an assertion)
    for proc in procs:
        assert proc.poll() is None, log_of(processes, proc)[-3000:]

    private_redis.start()
    back_at = time.monotonic()
    instances = start(chain(http("a", sink), scripted("b")), count=2)
    wait_all(instances, "completed")
    served_s = time.monotonic() - back_at
    counts = check_survived(processes, procs)
    client = private_redis.client()
    wait_for(lambda: client.scard("rq:workers") == 2, message="both workers registered")
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    record("processes started while Redis is down", statuses=statuses(instances),
           steps=sum(h.steps for h in histories), **effects, **counts,
           served_after_redis_back_s=round(served_s, 2))
