"""The llm response cache's storage: a table shared by every worker (workflows/engine/llm_cache.py has
the key and the interface). Cleared by `manage.py clear_llm_cache` and the admin; expired rows are
purged by the scheduler's tick."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F

from workflows import clock
from workflows.engine.llm_cache import CachedResponse
from workflows.models import LLMCacheEntry

PURGE_BATCH = 1000
PURGE_EVERY = timedelta(seconds=60)


class DatabaseCache:
    """The ResponseCache handed to one opted-in llm step: scoped to its workflow, stores its step id."""

    def __init__(self, workflow_id: int, node_id: str, step_id: int | None, instance_id: int | None) -> None:
        self.workflow_id = workflow_id
        self.node_id = node_id
        self.step_id = step_id
        self.instance_id = instance_id

    def get(self, key: str, now: datetime) -> CachedResponse | None:
        row = (LLMCacheEntry.objects.filter(workflow_id=self.workflow_id, key=key, expires_at__gt=now)
               .values_list("pk", "output", "usage", "source_step", "created_at").first())
        if row is None:
            return None
        pk, output, usage, source_step, created_at = row
        LLMCacheEntry.objects.filter(pk=pk).update(hits=F("hits") + 1, last_hit_at=now)
        return CachedResponse(output=output, usage=usage or {}, source_step=source_step, created_at=created_at)

    def put(self, key: str, output: dict[str, Any], usage: dict[str, Any], now: datetime, ttl_s: float) -> None:
        entry = LLMCacheEntry(workflow_id=self.workflow_id, key=key, node_id=self.node_id, output=output,
                              usage=usage, source_step=self.step_id, source_instance=self.instance_id,
                              created_at=now, expires_at=now + timedelta(seconds=ttl_s), hits=0, last_hit_at=None)
        # An upsert: two workers missing on the same key at once both store; the later reply wins.
        LLMCacheEntry.objects.bulk_create(
            [entry], update_conflicts=True, unique_fields=["workflow", "key"],
            update_fields=["node_id", "output", "usage", "source_step", "source_instance", "created_at",
                           "expires_at", "hits", "last_hit_at"])


def clear(*, workflow_slug: str | None = None, expired_only: bool = False, now: datetime | None = None) -> int:
    """Delete cached replies (of one workflow; only the expired ones): how many went."""

    rows = LLMCacheEntry.objects.all()
    if workflow_slug is not None:
        rows = rows.filter(workflow__slug=workflow_slug)
    if expired_only:
        rows = rows.filter(expires_at__lte=now or clock.now())
    deleted, _ = rows.delete()
    return deleted


def purge_expired(now: datetime) -> int:
    """One batch of expired rows (the scheduler calls this each tick it is due)."""
    ids = list(LLMCacheEntry.objects.filter(expires_at__lte=now).values_list("pk", flat=True)[:PURGE_BATCH])
    if not ids:
        return 0
    deleted, _ = LLMCacheEntry.objects.filter(pk__in=ids).delete()
    return deleted


class PurgeSchedule:
    """Run `purge` at most once per `every` of the scheduler's clock (a tick is about a second); the
    generated plans' purge (workflows/authoring/plans.py) uses one too."""

    def __init__(self, purge: Callable[[datetime], int], every: timedelta) -> None:
        self.purge = purge
        self.every = every
        self.next_at: datetime | None = None

    def run_if_due(self, now: datetime) -> int:
        # A clock that went back (a test's or an operator's `now`) does not postpone the purge.
        if self.next_at is not None and self.next_at - self.every <= now < self.next_at:
            return 0
        self.next_at = now + self.every
        return self.purge(now)


schedule = PurgeSchedule(purge_expired, PURGE_EVERY)
