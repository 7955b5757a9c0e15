"""An llm step on a synchronous worker opens no database connection it leaves behind.

Its handler runs on an event loop of its own (LLM.run -> outbound.run_closing), and its database
helpers (the circuit breaker's gate, the response cache) run off that loop on a thread. Threads that
end without closing their Django connection leave a PostgreSQL session open per thread until the
garbage collector finds it: a long-running worker would exhaust max_connections. In-process: the
jobs are captured and run here one at a time, as a synchronous worker runs them.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from tests.conftest import chain
from workflows import runtime
from workflows.authoring import node_trial
from workflows.db_threads import DjangoThreadPool
from workflows.models import LLMCacheEntry, StepRun

pytestmark = pytest.mark.django_db(transaction=True)

WARM_UP = 3
MORE = 12


@pytest.fixture(autouse=True)
def breaker_reads_the_database(settings: Any) -> None:
    # Every gate reads and writes the breaker's row (no per-process cache): each step's allow() and
    # record() are database calls made off the handler's loop, as are the cache's get and put.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "BREAKER_CACHE_S": 0, "BREAKER_FLUSH_S": 0}


def open_connections() -> int:
    """Django connections of this process that hold an open database connection, in any thread."""
    return sum(1 for obj in gc.get_objects()
               if isinstance(obj, BaseDatabaseWrapper) and obj.connection is not None)


def sessions() -> int | None:
    """PostgreSQL sessions on the test database (None on SQLite)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def run_llm_steps(make_version: Any, jobs: list[tuple[int, str]], count: int, start: int) -> None:
    version = make_version(chain({"id": "ask", "type": "llm", "config": {
        "provider": "scripted", "script": [{"text": "hi"}], "prompt": "Say {{ input.n }}",
        "cache": {"ttl_s": 600}}}), slug="conn-leak")
    for n in range(start, start + count):
        instance = runtime.start_instance(version, {"n": n})
        while jobs:
            runtime.run_step(jobs.pop(0)[0], "w")
        step = StepRun.objects.get(instance=instance, node_id="ask")
        assert step.status == "succeeded", step.error
        assert step.output["cache"] == {"hit": False, "stored": True}


def test_sync_llm_steps_leave_no_database_connections_open(make_version, jobs):
    run_llm_steps(make_version, jobs, WARM_UP, 0)
    connections_before, sessions_before = open_connections(), sessions()

    run_llm_steps(make_version, jobs, MORE, WARM_UP)

    assert LLMCacheEntry.objects.count() == WARM_UP + MORE  # each step did use the cache (get, then put)
    assert open_connections() <= connections_before, "sync llm steps left database connections open"
    if sessions_before is not None:
        assert sessions() <= sessions_before, "sync llm steps left PostgreSQL sessions open"


def test_the_helpers_reuse_one_connection_instead_of_opening_one_per_step(make_version, jobs):
    # On SQLite a dead thread's connection is usually freed at once; on PostgreSQL it waits for the
    # garbage collector. Either way a connection opened per step is one too many.
    run_llm_steps(make_version, jobs, WARM_UP, 0)
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(count)
    try:
        run_llm_steps(make_version, jobs, MORE, WARM_UP)
    finally:
        connection_created.disconnect(count)
    assert opened == [], f"{len(opened)} database connection(s) opened for {MORE} llm steps"


def test_a_node_test_of_an_llm_node_leaves_no_connection_open(db):
    graph = chain({"id": "ask", "type": "llm", "config": {
        "provider": "scripted", "script": [{"text": "hi"}], "prompt": "Say hi", "cache": {"ttl_s": 600}}})
    node_trial.run_trial(graph, "ask", {})
    before = open_connections()
    for _ in range(MORE):
        answer = node_trial.run_trial(graph, "ask", {})
        assert answer["error"] is None and answer["output"]["text"] == "hi"
    assert open_connections() <= before


def test_on_the_ai_consumers_loop_the_helpers_use_its_database_pool(make_version, jobs, monkeypatch):
    """As the ai consumer runs an llm step (workflows/workers/aiworker.py): the ORM on its DjangoThreadPool,
    which is also the loop's default executor, and `arun` on the loop. The helpers run on that pool's
    threads (no hop to the synchronous path's helper thread), whose connections are reused."""
    from workflows.adapters.llm_cache import DatabaseCache

    version = make_version(chain({"id": "ask", "type": "llm", "config": {
        "provider": "scripted", "script": [{"text": "hi"}], "prompt": "Say {{ input.n }}",
        "cache": {"ttl_s": 600}}}), slug="conn-leak-ai")
    ran_on: list[str] = []
    put = DatabaseCache.put

    def recording_put(self: DatabaseCache, *args: Any) -> None:
        ran_on.append(threading.current_thread().name)
        put(self, *args)

    monkeypatch.setattr(DatabaseCache, "put", recording_put)
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    async def consume(pool: DjangoThreadPool, count_from: int) -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(pool)
        for n in range(WARM_UP + MORE):
            if n == count_from:
                connection_created.connect(count)
            await loop.run_in_executor(pool, runtime.start_instance, version, {"n": n})
            step_id, _ = jobs.pop(0)
            claim = await loop.run_in_executor(pool, runtime.claim_step, step_id, "ai")
            call = await loop.run_in_executor(pool, runtime.build_call, claim)
            result = await claim.kind.arun(call)
            await loop.run_in_executor(pool, runtime.finish_step, claim, runtime.Outcome(result=result))

    try:
        asyncio.run(consume(DjangoThreadPool(1, "sf-ai-db"), WARM_UP))  # shut down (closed) by asyncio.run
    finally:
        connection_created.disconnect(count)
    assert len(ran_on) == WARM_UP + MORE and all(name.startswith("sf-ai-db") for name in ran_on), ran_on
    assert opened == [], f"{len(opened)} database connection(s) opened for {MORE} llm steps"
    assert not any(t.name.startswith("sf-db-helper") for t in threading.enumerate())
    assert StepRun.objects.filter(node_id="ask", status="succeeded").count() == WARM_UP + MORE
