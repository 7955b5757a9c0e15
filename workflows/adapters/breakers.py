"""Circuit breakers stored in the database, so every worker process shares one state per provider.

The decisions are engine/breaker.py's. The row is the shared truth: every state change (closed ->
open -> half-open -> closed) happens on it under its row lock. What stays in the process
(engine/breaker_local.py) is what need not be shared at once:

- window counts: each process counts its outcomes and adds them to the row at most every
  `BREAKER_FLUSH_S`, in one locked transaction, or at once when an outcome may open the breaker
  (a failure while the window it knows fails at more than the ratio). A half-open trial's outcome
  is always written at once, and so is a process's first outcome (nothing written yet: a forked
  work horse, which leaves with os._exit, writes its one call). Pending counts are also written at
  process exit (atexit), on the ai consumer's tick, and by `flush()`.
- the state `allow()` reads: cached `BREAKER_CACHE_S`, read without a lock; a closed breaker lets
  the call through, an open one still cooling down refuses it; only a due trial takes the row lock.

Keys are bounded (issue 10): the provider is `openai` or `scripted`, and a model has a breaker of
its own only when the operator declared it (a key of `STEADYFLOW_LLM_PRICES`, or the default model)
and its name is short and plain; any other model name, e.g. one a template rendered from input,
shares `<provider>:*`. A node with an LLM provider credential counts against
`credential:<name>:<model>` for the models the credential allows, `credential:<name>:*` otherwise.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from workflows.clock import timestamp as db_timestamp
from workflows.database_outage import DatabaseOutage
from workflows.engine import breaker as logic
from workflows.engine.breaker_local import LocalCounts
from workflows.engine.nodes.llm import provider_of
from workflows.engine.secrets import ProviderAccount
from workflows.models import BreakerState

log = logging.getLogger("steadyflow.breakers")
database_outage = DatabaseOutage(log, "circuit breakers")

DEFAULT_MODEL = "gpt-4o-mini"
OTHER_MODELS = "*"
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")


def breaker_config() -> logic.BreakerConfig:
    conf = settings.STEADYFLOW
    return logic.BreakerConfig(
        failure_ratio=conf["BREAKER_FAILURE_RATIO"],
        window_s=conf["BREAKER_WINDOW_S"],
        min_calls=conf["BREAKER_MIN_CALLS"],
        cooldown_s=conf["BREAKER_COOLDOWN_S"],
    )


def _flush_every_s() -> float:
    return float(settings.STEADYFLOW.get("BREAKER_FLUSH_S", 1.0))


def _cache_s() -> float:
    return float(settings.STEADYFLOW.get("BREAKER_CACHE_S", 0.25))


def provider_key(config: dict[str, Any], account: ProviderAccount | None = None) -> str:
    """The breaker an llm node's call counts against (`config` is the rendered node config;
    `account` its provider credential, whose allowed models bound the keys it makes)."""
    default = settings.STEADYFLOW.get("LLM_DEFAULT_PROVIDER", "scripted")
    if account is None and provider_of(config, default) == "scripted":
        return "scripted"
    if account is not None:
        model = str(config.get("model") or DEFAULT_MODEL)
        if model in account.models and _MODEL_NAME.fullmatch(model):
            return f"credential:{account.name}:{model}"
        return f"credential:{account.name}:{OTHER_MODELS}"
    # Anything else is sent to the OpenAI-compatible endpoint (see LLM._call_provider).
    model = str(config.get("model") or DEFAULT_MODEL)
    declared = {name for name in settings.STEADYFLOW.get("LLM_PRICES", {}) if name != "*"} | {DEFAULT_MODEL}
    if model in declared and _MODEL_NAME.fullmatch(model):
        return f"openai:{model}"
    return f"openai:{OTHER_MODELS}"


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


# --- This process's counts and cached states, one per key -------------------------------------------

_registry: dict[str, LocalCounts] = {}
_registry_lock = threading.Lock()


def local_counts(key: str) -> LocalCounts:
    with _registry_lock:
        local = _registry.get(key)
        if local is None:
            local = _registry[key] = LocalCounts()
        return local


def forget_local() -> None:
    """Drop this process's pending counts and cached states (tests; a forked child, whose parent
    writes its own counts)."""
    global _registry_lock
    _registry.clear()
    _registry_lock = threading.Lock()  # a fork may have copied it held by another thread


def _pending_keys() -> list[str]:
    with _registry_lock:
        return [key for key, local in _registry.items() if local.has_pending()]


def has_pending() -> bool:
    return bool(_pending_keys())


def flush() -> None:
    """Write every pending count of this process now."""
    for key in _pending_keys():
        DatabaseBreaker(key).write()


def flush_due() -> None:
    """Write the counts whose last write is `BREAKER_FLUSH_S` old (the ai consumer's tick)."""
    now, every = db_timestamp(), _flush_every_s()
    for key in _pending_keys():
        if local_counts(key).due(now, every):
            DatabaseBreaker(key).write_quietly()


def flush_quietly() -> None:
    """`flush()` at process exit: a failure is logged, not raised."""
    try:
        flush()
    except Exception:  # noqa: BLE001 - at exit there is nobody left to tell but the log
        log.exception("could not write the circuit breakers' last counts")


atexit.register(flush_quietly)
os.register_at_fork(after_in_child=forget_local)


class DatabaseBreaker:
    """The BreakerGate handed to llm nodes: one per step attempt (allow, then record or release)."""

    def __init__(self, key: str, *, local: LocalCounts | None = None,
                 clock: Callable[[], float] = db_timestamp) -> None:
        self.key = key
        self.local = local if local is not None else local_counts(key)
        self.clock = clock
        self._trial = False  # this gate's allow() let a half-open trial through

    def _locked_row(self) -> BreakerState:
        row, _ = BreakerState.objects.get_or_create(key=self.key)
        return BreakerState.objects.select_for_update().get(pk=row.pk)

    def _read(self, now: float) -> logic.Breaker:
        row = BreakerState.objects.filter(key=self.key).values_list(
            "state", "buckets", "opened_at", "trial_started_at").first()
        state = logic.Breaker() if row is None else logic.Breaker(*row)
        self.local.seen(state, now)
        return state

    def allow(self) -> bool:
        now, config = self.clock(), breaker_config()
        seen = self.local.fresh(now, _cache_s())
        if seen is None:
            if self.local.due(now, _flush_every_s()) and self.local.begin_write():
                try:
                    seen = self._write(now, config)  # due anyway: one transaction reads and writes
                finally:
                    self.local.end_write()
            else:
                seen = self._read(now)
        if seen.state == logic.CLOSED:
            return True
        if seen.state == logic.OPEN and seen.opened_at is not None and now - seen.opened_at < config.cooldown_s:
            return False
        # The cool-down is over (or a trial runs): who takes the trial is decided under the lock.
        with transaction.atomic():
            row = self._locked_row()
            current = _load(row)
            moved, allowed = logic.allow(current, now, config)
            if moved != current:
                _store(row, moved)
        self.local.seen(moved, now)
        self._trial = allowed and current.state != logic.CLOSED
        return allowed

    def record(self, ok: bool) -> None:
        now, config = self.clock(), breaker_config()
        if self._trial or self.local.last_state() == logic.HALF_OPEN:
            # The trial's verdict (or any outcome while half-open) applies at once, to every process.
            self._trial = False
            self._write(now, config, lambda state: logic.record(state, ok, now, config))
            return
        if self.local.add(ok, now, config):
            self.write_quietly(wait=True)  # may open the breaker: even if another thread is writing
        elif self.local.due(now, _flush_every_s()):
            self.write_quietly()

    def release(self) -> None:
        """The call ended without a verdict on the provider (a permanent error such as HTTP 400):
        nothing is counted; a trial slot it held is freed."""
        if self._trial:
            self._trial = False
            self._write(self.clock(), breaker_config(), logic.release_trial)

    def write(self) -> None:
        """Write this process's pending counts now."""
        self._write(self.clock(), breaker_config())

    def write_quietly(self, *, wait: bool = False) -> None:
        """Write the pending counts; a failure leaves them for the next write. Without `wait`, only
        when no other thread of this process is writing them (the periodic write)."""
        claimed = self.local.begin_write()
        if not claimed and not wait:
            return
        started = time.monotonic()
        try:
            self._write(self.clock(), breaker_config())
        except DatabaseError as exc:
            # The database away (a crash, a full disk): once per episode, not every flush of every breaker.
            database_outage.failed(f"writing breaker {self.key}'s counts", exc, "kept for the next write")
        except Exception:  # noqa: BLE001 - a step must not fail over the breaker's bookkeeping
            log.warning("circuit breaker %s: could not write its counts; kept for the next write", self.key,
                        exc_info=True)
        else:
            database_outage.recovered(started)
        finally:
            if claimed:
                self.local.end_write()

    def _write(self, now: float, config: logic.BreakerConfig,
               then: Callable[[logic.Breaker], logic.Breaker] | None = None) -> logic.Breaker:
        """Under the row lock: add the pending counts, apply `then` (a trial's verdict), save."""
        counts = self.local.take()
        try:
            with transaction.atomic():
                row = self._locked_row()
                current = _load(row)
                moved = logic.merge(current, counts, now, config)
                if then is not None:
                    moved = then(moved)
                if moved != current:
                    _store(row, moved)
        except BaseException:
            self.local.give_back(counts)
            raise
        self.local.seen(moved, now, written=True)
        return moved


def state_of(key: str) -> str:
    row = BreakerState.objects.filter(key=key).first()
    return row.state if row else logic.CLOSED


def is_blocking(key: str) -> bool:
    """Open and still cooling down: a call now would be refused (after the cool-down it is a trial)."""
    row = BreakerState.objects.filter(key=key).first()
    if row is None or row.state != logic.OPEN or row.opened_at is None:
        return False
    return db_timestamp() - row.opened_at < breaker_config().cooldown_s


def reset(key: str) -> None:
    """An operator closes a breaker by hand (workers see it within BREAKER_CACHE_S)."""
    with transaction.atomic():
        row = DatabaseBreaker(key)._locked_row()
        _store(row, logic.Breaker())
