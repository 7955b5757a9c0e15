"""Shared fixtures: real Redis, real worker processes, and helpers to wait for instances.

Worker processes must see the test database, so tests that use them are transactional
(`transactional_db`): what the test writes is committed, and workers read it through the
DATABASE_URL built here from the test connection's settings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.forkserver import python_popen

ROOT = Path(__file__).resolve().parent.parent


def database_url_for_tests() -> str:
    from django.db import connection

    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"


@pytest.fixture(autouse=True)
def _fresh_graph_cache() -> Iterator[None]:
    """Version ids come back after a test's rollback; the per-process graph cache must not outlive it.
    (In production versions are immutable and committed ids are never reused.)"""
    from workflows.runtime import graph_for_version

    graph_for_version.cache_clear()
    yield


@pytest.fixture(autouse=True)
def _fresh_breaker_counts() -> Iterator[None]:
    """The circuit breakers' per-process counts and cached states belong to one test: none of it
    may be written into the next test's database (or at exit, after the test database is gone)."""
    from workflows.adapters import breakers

    breakers.forget_local()
    yield
    breakers.forget_local()


@pytest.fixture(autouse=True)
def _fresh_webhook_rejection_counts() -> None:
    """The webhook endpoint counts rejected requests per client address in Redis (workflows/triggers/
    throttle.py), and every test client is 127.0.0.1: one test's rejections must not count in the next."""
    from workflows.adapters import ratelimit

    try:
        conn = ratelimit.connection()
        # The same for the other counts kept per address or per user (user ids come back after a
        # rollback): the API's rate limit, a hook's known senders, failed /metrics tokens.
        keys = [key for pattern in ("steadyflow:webhook-reject-*", "steadyflow:api-rate-user:*",
                                    "steadyflow:webhook-sender:*", "steadyflow:metrics-fail:*")
                for key in conn.scan_iter(pattern, count=1000)]
        if keys:
            conn.delete(*keys)
    except Exception:  # noqa: BLE001, S110 - no Redis: nothing was counted either
        pass


@pytest.fixture(autouse=True)
def _no_open_stream_slots() -> Iterator[None]:
    """Event-stream slots are counted per process (dashboard/api/v1/stream_slots.py): a test's streams must
    not count against the next test's caps."""
    from dashboard.api.v1 import stream_slots

    stream_slots.SLOTS.reset()
    yield


@pytest.fixture(autouse=True)
def _helper_thread_closed() -> Iterator[None]:
    """The process's helper thread (workflows/db_threads.py) keeps a database connection: closed after
    each test, so none is left open when the test database is dropped."""
    yield
    from workflows import db_threads

    db_threads.shutdown_helpers()


@pytest.fixture(autouse=True)
def _no_shared_rows_open(request: Any) -> None:
    """A transactional test commits; inside a module's shared-rows transaction (tests/support/shared_rows.py)
    its commits would reach no other connection (workers, daphne, the channels' threads) and its flush
    would be rolled back. Refused with the reason, rather than failing somewhere downstream."""
    if not {"transactional_db", "live_server"} & set(request.fixturenames):
        return
    from django.db import connections

    open_in = [alias for alias in connections if connections[alias].in_atomic_block]
    assert not open_in, (f"{request.node.nodeid} is transactional but a module's shared rows are still open "
                         f"(a transaction on {open_in}): move it to a module of its own, or run with --dist load")


@pytest.fixture
def redis_conn() -> Iterator[Any]:
    """The real Redis the queues use, emptied before the test (queues and live groups only)."""
    import django_rq

    conn = django_rq.get_connection("default")
    conn.flushdb()
    yield conn


@pytest.fixture
def worker_env(transactional_db: None, redis_conn: Any) -> dict[str, str]:
    from django.conf import settings

    env = dict(os.environ)
    env["DATABASE_URL"] = database_url_for_tests()
    env["REDIS_URL"] = settings.REDIS_URL
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("STEADYFLOW_LEASE_S", str(settings.STEADYFLOW["LEASE_S"]))
    return env


class Processes:
    """Start manage.py processes (workers, scheduler) in their own process groups; stop them all."""

    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.env = env
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.tmp_path / f"{'-'.join(args).replace('/', '_')}-{len(self.procs)}.log", "wb")
        proc = python_popen([sys.executable, "manage.py", *args], cwd=ROOT, env={**self.env, **(env or {})},
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def worker(self, *queues: str, burst: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return self.start("run_worker", *queues, *(["--burst"] if burst else []), env=env)

    def scheduler(self, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return self.start("run_scheduler", env=env)

    def all_workers(self) -> None:
        self.worker("default")
        self.worker("io")
        self.worker("ai", *(["--sync"] if os.environ.get("STEADYFLOW_TEST_AI_SYNC") else []))
        self.scheduler()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.tmp_path.glob("*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def processes(worker_env: dict[str, str], tmp_path: Path, request: Any) -> Iterator[Processes]:
    procs = Processes(worker_env, tmp_path)
    yield procs
    procs.stop()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(procs.logs())


# --- The two tiers (Makefile: `make test` runs them in sequence) -------------------------------------
# The in-process tier runs in parallel (pytest-xdist: a test database and a Redis database per worker,
# tests/settings.py). The `serial` tier is every test that starts real processes or binds a browser to a
# live server: worker, scheduler and daphne processes, Playwright's chromium, the fault-injection harness,
# the dev runner and the image build. Those are slow for what they wait on, not for CPU, and compete for the
# same two cores with anything run beside them, so they run after the in-process tier, one at a time.
SERIAL_FIXTURES = frozenset({"processes", "worker_env", "live_server", "browser", "page", "daphne_server",
                             "daphne_page", "private_redis"})
SERIAL_DIRS = ("e2e", "faults", "scripts", "bench")
# Fixtures that choose the store for the test themselves (tests/store/conftest.py): such a test runs the
# same code whatever STEADYFLOW_STORE says, so CI's ORM-store pass (.ci/run) leaves it out.
STORE_PINNING_FIXTURES = frozenset({"store_name", "use_store"})


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        relative = Path(str(item.path)).resolve().relative_to(tests_dir)
        if fixtures & SERIAL_FIXTURES or relative.parts[0] in SERIAL_DIRS:
            item.add_marker(pytest.mark.serial)
        if fixtures & STORE_PINNING_FIXTURES:
            item.add_marker(pytest.mark.store_pinned)
        if "doc_shot" in fixtures:  # takes a picture for docs/screenshots: `make screenshots` runs these
            item.add_marker(pytest.mark.screenshots)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
             message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")


def wait_for_status(instance: Any, statuses: set[str] | str, timeout: float = 30.0) -> Any:
    wanted = {statuses} if isinstance(statuses, str) else set(statuses)

    def settled() -> bool:
        instance.refresh_from_db()
        return instance.status in wanted

    try:
        wait_for(settled, timeout, message=f"instance {instance.pk} to reach {sorted(wanted)}")
    except AssertionError:
        raise AssertionError(f"instance {instance.pk} is {instance.status} ({instance.halt_reason}: "
                             f"{instance.error}), expected {sorted(wanted)}") from None
    return instance


@pytest.fixture
def roles(db: None) -> dict[str, Any]:
    """The viewers/designers/operators groups (transactional tests flush what migrations created)."""
    from workflows.roles import ensure_roles

    return ensure_roles()


@pytest.fixture
def user_in(roles: dict[str, Any]) -> Callable[..., Any]:
    """Create a user in one of the role groups: user_in("operators", "olga")."""
    from django.contrib.auth.models import User

    def make(role: str, username: str | None = None) -> Any:
        user = User.objects.create_user(username or f"{role}-user", password="pw")
        user.groups.add(roles[role])
        return User.objects.get(pk=user.pk)  # a fresh object: no stale permission cache

    return make


@pytest.fixture
def make_version(db: None) -> Callable[..., Any]:
    """Save a graph (validated) as a new version of a definition and return the version."""
    from workflows.authoring.definitions import save_version

    counter = {"n": 0}

    def make(graph: dict[str, Any], slug: str | None = None) -> Any:
        counter["n"] += 1
        return save_version(slug or f"test-{counter['n']}", graph)

    return make


def chain(*nodes: dict[str, Any], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """A graph start -> nodes... -> end with unconditional edges."""
    all_nodes = [{"id": "start", "type": "start"}, *nodes, {"id": "end", "type": "end"}]
    ids = [n["id"] for n in all_nodes]
    graph: dict[str, Any] = {
        "nodes": all_nodes,
        "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
    }
    if settings:
        graph["settings"] = settings
    return graph


def halts_as_it_starts(**settings: Any) -> dict[str, Any]:
    """A graph the loop breaker halts as it starts, under a max_transitions validation accepts: the
    start fans out to three noop nodes (1 + 3 activations), past max_transitions 3, which its
    shortest run (start -> w1 -> end, 3 activations) fits. `settings` are added to it."""
    work = [{"id": f"w{i}", "type": "python", "config": {"function": "noop"}} for i in (1, 2, 3)]
    return {"nodes": [{"id": "start", "type": "start"}, *work, {"id": "end", "type": "end"}],
            "edges": [*({"source": "start", "target": n["id"]} for n in work),
                      *({"source": n["id"], "target": "end"} for n in work)],
            "settings": {"max_transitions": 3, **settings}}


def past_deadline(instance: Any) -> Any:
    """A moment just past the instance's TTL deadline: expire it without waiting on the wall clock."""
    from datetime import timedelta

    return instance.deadline + timedelta(seconds=1)
