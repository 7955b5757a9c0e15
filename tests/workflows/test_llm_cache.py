"""The llm response cache (workflows/engine/llm_cache.py, workflows/adapters/llm_cache.py) end to end: real worker
processes (the ai consumer, and a synchronous worker for an llm node routed off the ai queue), real Redis,
the real database and a local OpenAI-compatible server counting the calls that reach it."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.conftest import chain, wait_for_status
from tests.support.llm_server import LLMTestServer
from workflows import runtime
from workflows.adapters import llm_cache
from workflows.models import LLMCacheEntry, StepRun, WorkflowInstance
from workflows.scheduler import reconciler

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"STEADYFLOW_LLM_PRICES": json.dumps({"*": {"prompt_per_1k": 10, "completion_per_1k": 20}}),
          "STEADYFLOW_BREAKER_MIN_CALLS": "100000"}


def cached_llm(ttl_s: int = 3600, **config: Any) -> dict[str, Any]:
    extra = {k: config.pop(k) for k in ("retry", "queue") if k in config}
    return {"id": "ask", "type": "llm", "config": {
        "provider": "openai", "model": "test-model", "prompt": "Say {{ input.word }}", "cache": {"ttl_s": ttl_s},
        "save_as": "said", **config}, **extra}


def run_ai(processes: Any, server: LLMTestServer, *instances: WorkflowInstance, status: str = "completed") -> None:
    """One burst of the ai consumer: it runs what is queued, then exits."""
    ai = processes.start("run_worker", "ai", "--burst", "--name", "ai-cache-test",
                         env={**PRICES, "STEADYFLOW_LLM_BASE_URL": server.url})
    assert ai.wait(timeout=60) == 0
    for instance in instances:
        wait_for_status(instance, status, timeout=5)


def ask_step(instance: WorkflowInstance) -> StepRun:
    return StepRun.objects.get(instance=instance, node_id="ask")


def test_hit_miss_and_key_sensitivity_on_the_ai_consumer(processes, redis_conn, make_version):
    version = make_version(chain(cached_llm()))
    with LLMTestServer() as server:
        first = runtime.start_instance(version, {"word": "ok"})
        run_ai(processes, server, first)
        assert len(server.requests) == 1
        source = ask_step(first)
        assert source.output["cache"] == {"hit": False, "stored": True}
        assert source.usage["cost_usd"] > 0
        first.refresh_from_db()
        assert first.cost_usd > 0 and first.tokens > 0

        same = runtime.start_instance(version, {"word": "ok"})
        other = runtime.start_instance(version, {"word": "no"})  # another rendered prompt: another key
        run_ai(processes, server, same, other)
        assert len(server.requests) == 2, "the same call must be served from the cache"
        assert server.requests[1]["messages"][-1]["content"] == "Say no"

        hit = ask_step(same)
        assert hit.output["cache"]["hit"] is True
        assert hit.output["cache"]["source_step"] == source.pk
        assert hit.output["cache"]["age_s"] >= 0
        assert hit.output["text"] == source.output["text"]
        assert hit.usage == {"model": "test-model", "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
                             "cached": True}
        same.refresh_from_db()
        assert same.cost_usd == Decimal(0) and same.tokens == 0
        assert same.context["said"] == source.output["text"]  # save_as applies to a hit too
        assert ask_step(other).output["cache"] == {"hit": False, "stored": True}

    entry = LLMCacheEntry.objects.get(source_step=source.pk)
    assert entry.hits == 1 and entry.workflow_id == version.definition_id
    assert LLMCacheEntry.objects.count() == 2


def test_an_expired_entry_is_a_miss_and_is_replaced_then_purged(processes, redis_conn, make_version):
    version = make_version(chain(cached_llm(ttl_s=60)))
    with LLMTestServer() as server:
        first = runtime.start_instance(version, {"word": "ok"})
        run_ai(processes, server, first)
        LLMCacheEntry.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        again = runtime.start_instance(version, {"word": "ok"})
        run_ai(processes, server, again)
        assert len(server.requests) == 2
    assert ask_step(again).output["cache"]["hit"] is False
    entry = LLMCacheEntry.objects.get()
    assert entry.source_step == ask_step(again).pk and entry.expires_at > timezone.now()

    # The scheduler's tick purges rows past their TTL (at most once a minute of its clock).
    llm_cache.schedule.next_at = None
    assert reconciler.tick(timezone.now()).cache_purged == 0
    later = timezone.now() + timedelta(minutes=2)
    assert reconciler.tick(later).cache_purged == 1
    assert not LLMCacheEntry.objects.exists()
    # Not again within the minute; a clock set back does not postpone it.
    LLMCacheEntry.objects.create(workflow_id=version.definition_id, key="old", output={},
                                 expires_at=timezone.now() - timedelta(seconds=1))
    assert reconciler.tick(later + timedelta(seconds=30)).cache_purged == 0
    assert reconciler.tick(timezone.now()).cache_purged == 1


def test_errors_are_never_cached_and_nodes_without_cache_store_nothing(processes, redis_conn, make_version):
    failing = make_version(chain(cached_llm(retry={"max_attempts": 1})))
    plain = make_version(chain({"id": "ask", "type": "llm", "config": {
        "provider": "openai", "model": "test-model", "prompt": "Say ok"}}))
    with LLMTestServer(status=500) as server:
        broken = runtime.start_instance(failing, {"word": "ok"})
        run_ai(processes, server, broken, status="failed")
        assert not LLMCacheEntry.objects.exists()
        server.configure(status=200)
        uncached = [runtime.start_instance(plain, {}) for _ in range(2)]
        run_ai(processes, server, *uncached)
        assert len(server.requests) == 3
    assert not LLMCacheEntry.objects.exists()
    assert all("cache" not in ask_step(i).output for i in uncached)


def test_a_synchronous_worker_honours_the_cache(processes, redis_conn, make_version):
    """An llm node routed to the default queue runs in an RQ worker (LLM.run): same cache."""
    version = make_version(chain({"id": "ask", "type": "llm", "queue": "default", "config": {
        "provider": "scripted", "prompt": "x", "script": [{"text": "first"}, {"text": "second"}],
        "cache": {"ttl_s": 600}}}))
    first = runtime.start_instance(version, {})
    assert processes.worker("default", burst=True).wait(timeout=60) == 0
    wait_for_status(first, "completed", timeout=5)
    second = runtime.start_instance(version, {})
    assert processes.worker("default", burst=True).wait(timeout=60) == 0
    wait_for_status(second, "completed", timeout=5)
    assert ask_step(first).output["cache"] == {"hit": False, "stored": True}
    assert ask_step(second).output["cache"]["hit"] is True
    assert ask_step(second).output["cache"]["source_step"] == ask_step(first).pk
    assert ask_step(second).output["text"] == "first"


def test_clear_command(make_version):
    one, two = make_version(chain(cached_llm()), slug="one"), make_version(chain(cached_llm()), slug="two")
    now = timezone.now()
    for version, key, expires in ((one, "a", now - timedelta(seconds=5)), (one, "b", now + timedelta(hours=1)),
                                  (two, "c", now - timedelta(seconds=5)), (two, "d", now + timedelta(hours=1))):
        LLMCacheEntry.objects.create(workflow_id=version.definition_id, key=key, output={}, expires_at=expires)
    with pytest.raises(CommandError, match="no workflow with slug 'nope'"):
        call_command("clear_llm_cache", "--workflow", "nope")
    call_command("clear_llm_cache", "--workflow", "one", "--expired")
    assert sorted(LLMCacheEntry.objects.values_list("key", flat=True)) == ["b", "c", "d"]
    call_command("clear_llm_cache", "--expired")
    assert sorted(LLMCacheEntry.objects.values_list("key", flat=True)) == ["b", "d"]
    call_command("clear_llm_cache", "--workflow", "two")
    assert list(LLMCacheEntry.objects.values_list("key", flat=True)) == ["b"]
    call_command("clear_llm_cache")
    assert not LLMCacheEntry.objects.exists()


def test_admin_action_clears_the_selected_entries_workflows(make_version, user_in, client):
    one, two = make_version(chain(cached_llm()), slug="one"), make_version(chain(cached_llm()), slug="two")
    later = timezone.now() + timedelta(hours=1)
    picked = LLMCacheEntry.objects.create(workflow_id=one.definition_id, key="a", output={}, expires_at=later)
    LLMCacheEntry.objects.create(workflow_id=one.definition_id, key="b", output={}, expires_at=later)
    LLMCacheEntry.objects.create(workflow_id=two.definition_id, key="c", output={}, expires_at=later)
    operator = user_in("operators", "olga")
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    response = client.post("/admin/workflows/llmcacheentry/", {"action": "clear_workflows",
                                                                "_selected_action": [picked.pk]}, follow=True)
    assert response.status_code == 200
    assert list(LLMCacheEntry.objects.values_list("key", flat=True)) == ["c"]
