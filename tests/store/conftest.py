"""Fixtures for the in-process store tests: a frozen clock, captured dispatch and live publishing, the
store chosen by name, and a driver that does a worker's and an operator's part in this process.

No worker process and no Redis: every job the runtime enqueues lands in `captured.queue` and the
driver runs it here, so a scenario is deterministic and can be run once per store and compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import pytest

import tests.store.functions  # noqa: F401 - registers the storetests.* python functions
from tests.store.driver import Captured, Clock, Driver

STORES = ("orm", "sql")


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    """The storetests.* functions count calls per node visit in process memory: from zero each test."""
    tests.store.functions.reset()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """timezone.now() stands still until the driver ticks it."""
    from django.utils import timezone

    from workflows import clock as shared_clock

    frozen = Clock()
    monkeypatch.setattr(timezone, "now", frozen)
    # The database's clock (workflows/clock.py) would add its offset to the frozen time: it stands still too.
    monkeypatch.setattr(shared_clock, "now", frozen)
    return frozen


class _NoKeeper:
    """The lease keeper's thread would extend leases on its own schedule (and its own connection);
    the driver's steps take milliseconds, and lease expiry is driven by the clock instead."""

    def holding(self, step_id: int, token: str) -> Any:
        return nullcontext()

    def holding_all(self, leases: Any) -> Any:
        return nullcontext()


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Captured:
    from workflows.adapters.breakers import DatabaseBreaker
    from workflows.live import notices as live
    from workflows.runtime import loop
    from workflows.workers import dispatch

    seen = Captured()
    monkeypatch.setattr(dispatch, "enqueue_steps", seen.enqueue_steps)
    monkeypatch.setattr(live, "publish_commit", seen.publish_commit)
    monkeypatch.setattr(loop, "keeper", _NoKeeper())
    # The llm node consults its breaker from a thread (another connection); a closed breaker says yes.
    monkeypatch.setattr(DatabaseBreaker, "allow", lambda self: True)
    monkeypatch.setattr(DatabaseBreaker, "record", lambda self, ok: None)
    return seen


@pytest.fixture
def use_store(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Switch the store the runtime uses (settings.STEADYFLOW["STORE"]), with fresh store objects."""
    from workflows import store

    def use(name: str) -> None:
        settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": name}
        monkeypatch.setattr(store, "_stores", {})

    return use


@pytest.fixture(params=STORES)
def store_name(request: pytest.FixtureRequest, use_store: Callable[[str], None]) -> str:
    use_store(request.param)
    return str(request.param)


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    # No password: hashing one costs more than a whole scenario.
    return django_user_model.objects.create_superuser("olga", password=None)


@pytest.fixture
def driver(clock: Clock, captured: Captured, operator: Any,
           django_capture_on_commit_callbacks: Callable[..., Any]) -> Driver:
    return Driver(clock, captured, operator, lambda: django_capture_on_commit_callbacks(execute=True))


@pytest.fixture
def version(make_version: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    """Save a graph as a version (the slug is free: one definition per test)."""
    return make_version


class CommitSpy:
    """What the SQL store's fast paths did: each one-round-trip commit tried on PostgreSQL (True when
    it committed), and each one-statement claim (True when it claimed) on either database."""

    def __init__(self) -> None:
        self.results: list[bool] = []
        self.claims: list[bool] = []

    def clear(self) -> None:
        self.results.clear()
        self.claims.clear()

    @property
    def committed(self) -> int:
        return sum(self.results)

    @property
    def fell_back(self) -> int:
        return len(self.results) - self.committed


@pytest.fixture
def commit_spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[CommitSpy]:
    from django.db import connection

    from workflows.store.postgres import PostgresStore
    from workflows.store.sqlite import SqliteStore

    spy = CommitSpy()
    sql_store = PostgresStore if connection.vendor == "postgresql" else SqliteStore
    claim_started = sql_store.claim_started

    def claiming(self: Any, *args: Any) -> Any:
        claimed = claim_started(self, *args)
        spy.claims.append(claimed is not None)
        return claimed

    monkeypatch.setattr(sql_store, "claim_started", claiming)
    if connection.vendor != "postgresql":
        yield spy
        return

    original = PostgresStore._commit_unlocked

    def counted(self: PostgresStore, unit: Any) -> bool:
        result = original(self, unit)
        spy.results.append(result)
        return result

    monkeypatch.setattr(PostgresStore, "_commit_unlocked", counted)
    yield spy

