"""Fixtures for the fault suite: a private Redis per test (so a test may flush or stop it), the
Idempotency-Key sink, fast lease/redispatch settings for the worker processes, and the checks every
fault test ends with.

Each test prints one line of figures (statuses, counts, recovery time); the whole table is repeated
in the terminal summary, so the figures show without -s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.faults.sink import Sink

# Worker-side bounds for the tests: a dead worker's step is taken back after LEASE_S, a queued
# step that no queue holds is re-enqueued after REDISPATCH_AFTER_S. (Production defaults: 30 and 10.)
LEASE_S = 3.0
REDISPATCH_AFTER_S = 1.0
SCHEDULER_INTERVAL_S = 0.2
# Every step that is made to fail by a fault gets this policy: a lease expiry is a failed attempt.
RETRY = {"max_attempts": 4, "backoff_s": 0.2, "max_backoff_s": 1.0}

REPORT: list[dict[str, Any]] = []


# --- A private Redis ----------------------------------------------------------------------------

class PrivateRedis:
    """redis-server (the binary the dev runner uses) on a unix socket of its own: stop, start and
    FLUSHALL here touch nobody else's queues."""

    def __init__(self) -> None:
        from scripts.devrun import redis_binary

        self.binary = redis_binary()
        # Unix socket paths are limited to ~107 bytes: keep the directory short.
        self.dir = Path(tempfile.mkdtemp(prefix="sf-redis-"))
        self.socket = self.dir / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.socket.exists():
            self.socket.unlink()
        self.proc = subprocess.Popen(
            [self.binary, "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir), "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.socket.exists():
                try:
                    self.client().ping()
                    return
                except Exception:  # noqa: BLE001 - not accepting yet
                    pass
            if self.proc.poll() is not None:
                raise RuntimeError("private redis-server exited at start")
            time.sleep(0.02)
        raise RuntimeError("private redis-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def client(self) -> Any:
        import redis

        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_redis(settings: Any) -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    # This process enqueues (start_instance) and inspects queues through django_rq: point it there too.
    settings.REDIS_URL = server.url
    settings.RQ_QUEUES = {name: {**conf, "URL": server.url} for name, conf in settings.RQ_QUEUES.items()}
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def worker_env(private_redis: PrivateRedis, sink: Sink, worker_env: dict[str, str]) -> dict[str, str]:
    """conftest's worker environment on the private Redis, with fast bounds, the sink allow-listed
    and this suite's python functions loaded."""
    from tests.faults.functions import EXTRA_FUNCTIONS_ENV

    worker_env.update(EXTRA_FUNCTIONS_ENV)
    worker_env.update({
        "REDIS_URL": private_redis.url,
        "STEADYFLOW_LEASE_S": str(LEASE_S),
        "STEADYFLOW_REDISPATCH_AFTER_S": str(REDISPATCH_AFTER_S),
        "STEADYFLOW_SCHEDULER_INTERVAL_S": str(SCHEDULER_INTERVAL_S),
        "STEADYFLOW_HTTP_ALLOWLIST": sink.host_port,
        "LOG_LEVEL": "INFO",
    })
    return worker_env


# --- Graphs -------------------------------------------------------------------------------------

def http(node_id: str, sink: Sink, *, delay: float = 0, queue: str | None = None,
         retry: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """An http node that POSTs to the sink (a side effect keyed by the step's idempotency key)."""
    url = sink.url(delay=delay) if delay else sink.url()
    node: dict[str, Any] = {"id": node_id, "type": "http", "config": {"method": "POST", "url": url},
                            "retry": retry or RETRY, **extra}
    if queue:
        node["queue"] = queue
    return node


def py(node_id: str, function: str, args: dict[str, Any] | None = None, *,
       retry: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "python", "config": {"function": function, "args": args or {}},
            "retry": retry or RETRY, **extra}


def new_version(graph: dict[str, Any]) -> Any:
    from workflows.authoring.definitions import save_version

    return save_version(f"fault-{uuid.uuid4().hex[:12]}", graph)


def start(graph: dict[str, Any], count: int = 1) -> list[Any]:
    """Save the graph and start `count` instances of it (committed: the workers see them)."""
    from workflows import runtime

    version = new_version(graph)
    return [runtime.start_instance(version, {"n": n}) for n in range(count)]


def step_of(instance: Any, node_id: str, visit: int = 1) -> Any:
    return instance.steps.get(node_id=node_id, visit=visit)


def wait_all(instances: list[Any], statuses: set[str] | str, timeout: float = 90.0) -> None:
    from tests.conftest import wait_for_status

    for instance in instances:
        wait_for_status(instance, statuses, timeout=timeout)


# --- Processes ----------------------------------------------------------------------------------

def children_of(pid: int) -> list[int]:
    """Direct children of a process, from /proc (an RQ work horse is its worker's child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command (which may contain spaces) start at the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def full_logs(processes: Any) -> str:
    """Everything the started processes wrote (the shared fixture's logs() keeps only each tail)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(processes.tmp_path.glob("*.log")))


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


# --- Checks -------------------------------------------------------------------------------------

OUTCOME_EVENTS = ("step_succeeded", "step_failed", "compensation_succeeded")


@dataclass
class History:
    instance_id: int
    status: str
    steps: int
    attempts: int
    events: int
    outcomes: Counter[str]


def check_history(instance: Any) -> History:
    """What every fault must leave intact: an event log without gaps, one StepRun per node visit with
    the `instance:node:visit` key, and at most one committed outcome per StepRun (exactly one for a
    finished step)."""
    from workflows.models import Event

    instance.refresh_from_db()
    seqs = list(instance.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, instance.event_seq + 1)), f"instance {instance.pk}: event seq gaps: {seqs}"
    runs = list(instance.steps.order_by("id"))
    visits = Counter((s.node_id, s.visit) for s in runs)
    assert all(n == 1 for n in visits.values()), f"instance {instance.pk}: a visit has several StepRuns"
    outcomes = Counter(
        Event.objects.filter(instance=instance, type__in=OUTCOME_EVENTS).values_list("step_id", flat=True))
    for step in runs:
        assert step.idempotency_key == f"{instance.pk}:{step.node_id}:{step.visit}"
        committed = outcomes.get(step.pk, 0)
        if step.status in ("succeeded", "failed", "compensated"):
            assert committed == 1, f"{step} has {committed} committed outcomes"
        else:
            assert committed == 0, f"{step} has {committed} committed outcomes"
    return History(instance_id=instance.pk, status=instance.status, steps=len(runs),
                   attempts=sum(s.attempt for s in runs if s.node_type not in ("start", "end")),
                   events=len(seqs), outcomes=Counter(s.status for s in runs))


def check_effects(sink: Sink, instances: Iterable[Any], *, exact: bool) -> dict[str, int]:
    """Each side-effecting step's key reached the sink, its effect happened once, and every delivery
    was one of that step's attempts (same key each time). With `exact`, no key arrived twice: the
    fault must not have re-run any handler."""
    from workflows.models import StepRun

    instances = list(instances)
    steps = {s.idempotency_key: s for s in StepRun.objects.filter(instance__in=instances)}
    deliveries = sink.delivery_counts()
    for key, count in deliveries.items():
        assert key in steps, f"the sink got key {key}, which no step of these instances has"
        assert sink.effects[key] == 1
        assert count <= steps[key].attempt, f"{key}: {count} deliveries for {steps[key].attempt} attempt(s)"
        if exact:
            assert count == 1, f"{key} arrived {count} times: a handler re-ran"
    for key, step in steps.items():
        if step.status == "succeeded" and step.node_type == "http":
            assert key in deliveries, f"{step} succeeded but the sink never saw {key}"
    return {"keys": len(deliveries), "deliveries": sum(deliveries.values()), "replays": sink.replays()}


def record(name: str, **figures: Any) -> None:
    """Print this fault's figures now (visible with -s) and keep them for the terminal summary."""
    REPORT.append({"fault": name, **figures})
    print(f"\n[fault] {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    terminalreporter.section("fault suite figures")
    for row in REPORT:
        figures = ", ".join(f"{k}={v}" for k, v in row.items() if k != "fault")
        terminalreporter.write_line(f"{row['fault']}: {figures}")


def statuses(instances: Iterable[Any]) -> dict[str, int]:
    return dict(Counter(i.status for i in instances))
