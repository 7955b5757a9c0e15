"""Circuit breakers stored in the database, so every worker process shares one state per provider.

The decisions are engine/breaker.py's; this module loads the row under a lock, applies them and
saves. One row lock per LLM call: measured small next to a call that takes seconds.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from workflows.engine import breaker as logic
from workflows.models import BreakerState


def breaker_config() -> logic.BreakerConfig:
    conf = settings.STEADYFLOW
    return logic.BreakerConfig(
        failure_ratio=conf["BREAKER_FAILURE_RATIO"],
        window_s=conf["BREAKER_WINDOW_S"],
        min_calls=conf["BREAKER_MIN_CALLS"],
        cooldown_s=conf["BREAKER_COOLDOWN_S"],
    )


def provider_key(config: dict[str, Any]) -> str:
    provider = config.get("provider", "openai")
    if provider == "scripted":
        return "scripted"
    return f"{provider}:{config.get('model') or 'gpt-4o-mini'}"


def _load(row: BreakerState) -> logic.Breaker:
    return logic.Breaker(state=row.state, buckets=row.buckets, opened_at=row.opened_at,
                         trial_started_at=row.trial_started_at)


def _store(row: BreakerState, value: logic.Breaker) -> None:
    row.state = value.state
    row.buckets = value.buckets
    row.opened_at = value.opened_at
    row.trial_started_at = value.trial_started_at
    row.updated_at = timezone.now()
    row.save()


class DatabaseBreaker:
    """The BreakerGate handed to llm nodes."""

    def __init__(self, key: str) -> None:
        self.key = key

    def _locked_row(self) -> BreakerState:
        row, _ = BreakerState.objects.get_or_create(key=self.key)
        return BreakerState.objects.select_for_update().get(pk=row.pk)

    def allow(self) -> bool:
        now = timezone.now().timestamp()
        # A closed breaker lets every call through: read it without the row lock, so the start of
        # every LLM call does not queue behind one row. Only open/half-open states need the lock.
        state = BreakerState.objects.filter(key=self.key).values_list("state", flat=True).first()
        if state in (None, logic.CLOSED):
            return True
        with transaction.atomic():
            row = self._locked_row()
            current = _load(row)
            moved, allowed = logic.allow(current, now, breaker_config())
            if moved != current:
                _store(row, moved)
        return allowed

    def record(self, ok: bool) -> None:
        now = timezone.now().timestamp()
        with transaction.atomic():
            row = self._locked_row()
            _store(row, logic.record(_load(row), ok, now, breaker_config()))


def state_of(key: str) -> str:
    row = BreakerState.objects.filter(key=key).first()
    return row.state if row else logic.CLOSED


def is_blocking(key: str) -> bool:
    """Open and still cooling down: a call now would be refused (after the cool-down it is a trial)."""
    row = BreakerState.objects.filter(key=key).first()
    if row is None or row.state != logic.OPEN or row.opened_at is None:
        return False
    return timezone.now().timestamp() - row.opened_at < breaker_config().cooldown_s


def reset(key: str) -> None:
    """An operator closes a breaker by hand."""
    with transaction.atomic():
        row = DatabaseBreaker(key)._locked_row()
        _store(row, logic.Breaker())
