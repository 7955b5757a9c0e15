"""Circuit breakers on the real database (workflows/adapters/breakers.py): per-process counts written to the
shared row, one state shared by every process, fairness (only provider-side failures count) and
bounded keys. Two DatabaseBreaker instances with their own LocalCounts stand for two processes; the
clock is a hand-moved number."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connections

from tests.conftest import chain, wait_for, wait_for_status
from tests.engine.conftest import make_call
from tests.support.llm_server import LLMTestServer
from workflows import runtime
from workflows.adapters import breakers
from workflows.database_outage import DatabaseOutage
from workflows.engine import breaker as logic
from workflows.engine import providers
from workflows.engine.breaker_local import LocalCounts
from workflows.engine.errors import ProviderError
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig
from workflows.models import BreakerState

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "openai:test-model"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def conf(settings: Any) -> dict[str, Any]:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "BREAKER_MIN_CALLS": 5, "BREAKER_FAILURE_RATIO": 0.5,
                           "BREAKER_WINDOW_S": 60.0, "BREAKER_COOLDOWN_S": 30.0, "BREAKER_FLUSH_S": 1.0,
                           "BREAKER_CACHE_S": 0.25, "LLM_PRICES": {}}
    return settings.STEADYFLOW


def process(clock: Clock, key: str = KEY) -> breakers.DatabaseBreaker:
    """A gate as one worker process makes them: its own counts and cache, a shared row."""
    local = LocalCounts()
    return breakers.DatabaseBreaker(key, local=local, clock=clock)


def gate_of(proc: breakers.DatabaseBreaker) -> breakers.DatabaseBreaker:
    """The next step's gate in the same process (the runtime makes one per step attempt)."""
    return breakers.DatabaseBreaker(proc.key, local=proc.local, clock=proc.clock)


def row(key: str = KEY) -> logic.Breaker:
    found = BreakerState.objects.filter(key=key).first()
    assert found is not None
    return logic.Breaker(found.state, found.buckets, found.opened_at, found.trial_started_at)


def window(key: str = KEY) -> tuple[int, int]:
    found = BreakerState.objects.filter(key=key).first()
    if found is None:
        return 0, 0
    return (sum(c for c, _ in found.buckets.values()), sum(f for _, f in found.buckets.values()))


# --- Counts: aggregated per process, written to the shared row ------------------------------------

def test_counts_wait_for_the_periodic_write_and_add_up_across_processes(conf: dict[str, Any]) -> None:
    clock = Clock()
    a, b = process(clock), process(clock)
    a.record(True)  # a process's first outcome is written at once (nothing written yet)
    assert window() == (1, 0)
    for _ in range(9):
        gate_of(a).record(True)
        gate_of(b).record(True)
    assert window() == (2, 0)  # b's first, then everything else waits
    clock.now += 0.5
    gate_of(a).record(True)
    assert window() == (2, 0)
    clock.now += 0.5  # a's last write is 1 s old: the next outcome writes everything a has
    gate_of(a).record(True)
    assert window() == (13, 0)  # a's 12 and b's first
    b.write()  # what flush() does for every key at exit
    assert window() == (21, 0)
    assert not a.local.has_pending() and not b.local.has_pending()


def test_flush_writes_every_pending_count_of_this_process(conf: dict[str, Any]) -> None:
    conf["BREAKER_FLUSH_S"] = 3600.0
    for _ in range(3):
        breakers.DatabaseBreaker(KEY).record(True)
        breakers.DatabaseBreaker("scripted").record(True)
    assert window() == (1, 0) and window("scripted") == (1, 0)
    assert breakers.has_pending()
    breakers.flush()
    assert window() == (3, 0) and window("scripted") == (3, 0)
    assert not breakers.has_pending()


def test_counts_the_database_refuses_are_kept_and_logged_once_per_episode(
        conf: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The database away (a crash, a full disk): every flush of every breaker failed with a warning and
    a traceback (one each half second in the crash test); now one warning when the episode begins and one
    when writes succeed again, and the counts are written then."""
    conf["BREAKER_FLUSH_S"] = 0.0
    monkeypatch.setattr(breakers, "database_outage",  # a fresh episode log (no episode from another test)
                        DatabaseOutage(logging.getLogger("steadyflow.breakers"), "circuit breakers"), raising=False)
    caplog.set_level(logging.DEBUG, logger="steadyflow.breakers")
    real_row = breakers.DatabaseBreaker._locked_row
    away = [True]

    def locked_row(self: Any) -> Any:  # the write's first statement
        if away[0]:
            raise OperationalError("connection failed: server closed the connection unexpectedly")
        return real_row(self)

    monkeypatch.setattr(breakers.DatabaseBreaker, "_locked_row", locked_row)
    clock = Clock()
    proc = process(clock)
    for _ in range(4):
        gate_of(proc).record(True)
        clock.now += 1
    assert window() == (0, 0) and proc.local.has_pending()
    away[0] = False
    gate_of(proc).record(True)
    assert window() == (5, 0)  # nothing lost: the kept counts are written with the next
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "writing breaker openai:test-model's counts failed" in warnings[0]
    assert "accepts writes again" in warnings[1]
    assert not any(r.exc_info for r in caplog.records)


def test_a_flush_interval_of_zero_writes_every_outcome(conf: dict[str, Any]) -> None:
    conf["BREAKER_FLUSH_S"] = 0.0
    clock = Clock()
    a = process(clock)
    for _ in range(3):
        gate_of(a).record(True)
    assert window() == (3, 0)


def test_failures_that_may_open_the_breaker_are_written_at_once(conf: dict[str, Any]) -> None:
    clock = Clock()
    a, b = process(clock), process(clock)
    for _ in range(6):
        gate_of(a).record(True)
    a.write()
    assert window() == (6, 0)
    # A rare failure waits with the successes...
    b.write()  # (nothing pending: b reads the row, and its first outcome is not written at once)
    gate_of(b).record(False)
    assert window() == (6, 0)
    # ...failures over the ratio of the window b knows do not: the breaker opens without waiting.
    for _ in range(6):
        gate_of(b).record(False)
    assert row().state == logic.OPEN
    assert window() == (13, 7)


# --- One state, shared by every process ------------------------------------------------------------

def open_breaker(clock: Clock, proc: breakers.DatabaseBreaker) -> None:
    for _ in range(5):
        gate_of(proc).record(False)
    assert row().state == logic.OPEN


def test_a_breaker_one_process_opens_is_open_for_the_other(conf: dict[str, Any]) -> None:
    clock = Clock()
    a, b = process(clock), process(clock)
    assert gate_of(b).allow()  # b has read the row: closed, cached for 0.25 s
    open_breaker(clock, a)
    assert not gate_of(a).allow()
    assert gate_of(b).allow()  # b's cached state, up to BREAKER_CACHE_S old
    clock.now += 0.25
    assert not gate_of(b).allow()
    assert window() == (5, 5)


def test_the_half_open_trial_is_shared_and_its_verdict_applies_at_once(conf: dict[str, Any]) -> None:
    clock = Clock()
    a, b = process(clock), process(clock)
    open_breaker(clock, a)
    clock.now += 31  # past the cool-down
    trial = gate_of(a)
    assert trial.allow()
    assert row().state == logic.HALF_OPEN
    assert not gate_of(b).allow()  # one trial at a time, across processes
    trial.record(True)  # written at once, though a's last write is not a second old
    assert row().state == logic.CLOSED
    clock.now += 0.25
    assert gate_of(b).allow()


def test_a_failed_trial_reopens_at_once(conf: dict[str, Any]) -> None:
    clock = Clock()
    a, b = process(clock), process(clock)
    open_breaker(clock, a)
    clock.now += 31
    trial = gate_of(b)
    assert trial.allow()
    trial.record(False)
    state = row()
    assert state.state == logic.OPEN and state.opened_at == clock.now
    assert not gate_of(a).allow()


def test_an_operator_reset_reaches_every_process(conf: dict[str, Any]) -> None:
    clock = Clock()
    a = process(clock)
    open_breaker(clock, a)
    breakers.reset(KEY)
    clock.now += 0.25
    assert gate_of(a).allow()
    assert row() == logic.Breaker()


# --- Fairness: only provider-side failures count ---------------------------------------------------

LLM = get_kind("llm")


class ClosingGate(breakers.DatabaseBreaker):
    """The node calls its gate in asyncio's default threads: close their connections after each call."""

    def allow(self) -> bool:
        try:
            return super().allow()
        finally:
            connections.close_all()

    def record(self, ok: bool) -> None:
        try:
            super().record(ok)
        finally:
            connections.close_all()

    def release(self) -> None:
        try:
            super().release()
        finally:
            connections.close_all()


@pytest.fixture
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def call_llm(server: LLMTestServer, model: str, local: LocalCounts | None = None) -> Any:
    """One llm node call, its gate keyed as the runtime keys it."""
    config = {"provider": "openai", "model": model, "prompt": "hi"}
    gate = ClosingGate(breakers.provider_key(config), local=local)
    call = make_call("llm", config, engine=EngineConfig(llm_base_url=server.url), breaker=gate,
                     node_extra={"retry": {"max_attempts": 1}})

    async def go() -> Any:
        try:
            return await LLM.arun(call)
        finally:
            await providers.close_sessions()

    return asyncio.run(go())


@pytest.mark.parametrize("status", [400, 404, 422])
def test_a_request_the_provider_refuses_fails_the_step_but_counts_nothing(
        conf: dict[str, Any], llm_server: LLMTestServer, status: int) -> None:
    """One workflow with a bad model name must not open the breaker it shares with everyone."""
    conf["BREAKER_FLUSH_S"] = 0.0
    llm_server.configure(model="no-such-model", status=status)
    for _ in range(8):
        with pytest.raises(ProviderError) as info:
            call_llm(llm_server, "no-such-model")
        assert info.value.permanent and info.value.details == {"status": status}
    assert breakers.state_of("openai:*") == logic.CLOSED
    assert window("openai:*") == (0, 0)
    # Another workflow on the same provider (and the same bounded key) is served.
    assert call_llm(llm_server, "some-other-model").output["text"] == "ok"
    assert window("openai:*") == (1, 0)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_provider_side_failures_open_the_breaker(conf: dict[str, Any], llm_server: LLMTestServer,
                                                  status: int) -> None:
    llm_server.configure(status=status)
    for _ in range(5):
        with pytest.raises(ProviderError) as info:
            call_llm(llm_server, "some-model")
        assert not info.value.permanent
    assert breakers.state_of("openai:*") == logic.OPEN
    served = len(llm_server.requests)
    with pytest.raises(Exception, match="circuit breaker for openai:\\* is open"):
        call_llm(llm_server, "some-model")
    assert len(llm_server.requests) == served


def test_a_trial_refused_as_a_bad_request_frees_the_slot(conf: dict[str, Any],
                                                          llm_server: LLMTestServer) -> None:
    conf["BREAKER_COOLDOWN_S"] = 0.0
    local = LocalCounts()
    llm_server.configure(status=500)
    for _ in range(5):
        with pytest.raises(ProviderError):
            call_llm(llm_server, "some-model", local)
    assert breakers.state_of("openai:*") == logic.OPEN
    llm_server.configure(status=200)
    llm_server.configure(model="bad-model", status=400)
    with pytest.raises(ProviderError, match="HTTP 400"):
        call_llm(llm_server, "bad-model", local)  # the trial: no verdict on the provider
    state = row("openai:*")
    assert state.state == logic.HALF_OPEN and state.trial_started_at is None
    assert call_llm(llm_server, "good-model", local).output["text"] == "ok"  # the next trial
    assert breakers.state_of("openai:*") == logic.CLOSED


# --- Bounded keys -----------------------------------------------------------------------------------

def test_breaker_keys_come_from_the_provider_and_declared_models(conf: dict[str, Any]) -> None:
    conf["LLM_PRICES"] = {"gpt-4o": {"prompt_per_1k": 1}, "*": {"prompt_per_1k": 2},
                          "x" * 101: {}, "bad name": {}}
    key = breakers.provider_key
    assert key({"provider": "openai", "model": "gpt-4o"}) == "openai:gpt-4o"
    assert key({"provider": "openai"}) == "openai:gpt-4o-mini"  # the default model
    # A node naming no provider counts where its call goes: the deployment's default provider.
    assert key({"model": "gpt-4o-mini"}) == "scripted"
    conf["LLM_DEFAULT_PROVIDER"] = "openai"
    assert key({"model": "gpt-4o-mini"}) == "openai:gpt-4o-mini"
    assert key({"provider": "scripted", "model": "anything"}) == "scripted"
    # Names a template rendered from input, unknown names, unsafe or overlong ones: one shared key.
    for model in ["gpt-4o-2099", "order 42: refund", "x" * 101, "bad name", "*", "", "a" * 5000,
                  "gpt-4o\n", "../../etc"]:
        expected = "openai:gpt-4o-mini" if model == "" else "openai:*"
        assert key({"provider": "openai", "model": model}) == expected, model
    # Whatever the provider field says, a call that goes to the OpenAI-compatible endpoint counts there.
    assert key({"provider": "{{ input.p }}", "model": "gpt-4o"}) == "openai:gpt-4o"


def test_input_cannot_create_breaker_rows(conf: dict[str, Any]) -> None:
    conf["BREAKER_FLUSH_S"] = 0.0
    for i in range(50):
        breakers.DatabaseBreaker(breakers.provider_key({"provider": "openai", "model": f"user-model-{i}"})).record(True)
    assert list(BreakerState.objects.values_list("key", flat=True)) == ["openai:*"]
    assert json.loads(json.dumps(row("openai:*").buckets))  # one row holds all 50 calls
    assert window("openai:*") == (50, 0)


def test_a_forked_work_horse_writes_its_call_and_only_its_own(processes, make_version) -> None:
    """`run_worker --fork`: each job's horse is a fork that leaves with os._exit (no atexit). Its one
    outcome reaches the row, and counts the parent held are not written twice by its children."""
    node = {"id": "ask", "type": "llm", "queue": "default",
            "config": {"provider": "scripted", "prompt": "x", "script": [{"text": "ok"}]}}
    version = make_version(chain(node))
    processes.start("run_worker", "default", "--fork")
    for _ in range(3):
        wait_for_status(runtime.start_instance(version, {}), "completed", timeout=60)
    assert window("scripted") == (3, 0)


def test_the_ai_consumer_writes_pending_counts_when_calls_stop(processes, make_version) -> None:
    """Counts waiting for the periodic write are written on the consumer's tick, not only when the
    next call comes (or at exit): the consumer below stays up and idle."""
    node = {"id": "ask", "type": "llm",
            "config": {"provider": "scripted", "prompt": "x", "script": [{"text": "ok"}]}}
    version = make_version(chain(node))
    processes.start("run_worker", "ai", env={"STEADYFLOW_BREAKER_FLUSH_S": "1"})
    instances = [runtime.start_instance(version, {}) for _ in range(4)]
    for instance in instances:
        wait_for_status(instance, "completed", timeout=60)
    wait_for(lambda: window("scripted") == (4, 0), timeout=20, message="all 4 calls in the breaker's window")
