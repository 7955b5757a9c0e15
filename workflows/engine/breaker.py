"""Circuit breaker logic for LLM providers: pure functions over a small state, time passed in.

closed -> open when, within the last `window_s`, at least `min_calls` calls were made and more than
`failure_ratio` of them failed. open -> half_open after `cooldown_s`: one trial call at a time is let
through; a success closes the breaker (and clears the window), a failure opens it again.

Outcomes arrive one at a time (`record`: a half-open trial's result) or as counts a process
aggregated (`merge`: the window's counts, see breaker_local.py); both move the state the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerConfig:
    failure_ratio: float = 0.5
    window_s: float = 60.0
    min_calls: int = 5
    cooldown_s: float = 30.0
    bucket_s: float = 5.0
    trial_timeout_s: float = 120.0  # a trial call that never reports back frees its slot after this


@dataclass(frozen=True)
class Breaker:
    state: str = CLOSED
    buckets: dict[str, list[int]] = field(default_factory=dict)  # bucket start -> [calls, failures]
    opened_at: float | None = None
    trial_started_at: float | None = None

    def counts(self, now: float, config: BreakerConfig) -> tuple[int, int]:
        horizon = now - config.window_s
        calls = failures = 0
        for start, (c, f) in self.buckets.items():
            if float(start) + config.bucket_s > horizon:
                calls += c
                failures += f
        return calls, failures


def _pruned(buckets: dict[str, list[int]], now: float, config: BreakerConfig) -> dict[str, list[int]]:
    horizon = now - config.window_s
    return {k: list(v) for k, v in buckets.items() if float(k) + config.bucket_s > horizon}


def bucket_key(now: float, config: BreakerConfig) -> str:
    """The window bucket an outcome at `now` is counted in (its start, epoch seconds)."""
    return str(int(now // config.bucket_s * config.bucket_s))


def add_counts(buckets: dict[str, list[int]], more: dict[str, list[int]]) -> dict[str, list[int]]:
    out = {k: list(v) for k, v in buckets.items()}
    for key, (calls, failures) in more.items():
        have = out.get(key, [0, 0])
        out[key] = [have[0] + calls, have[1] + failures]
    return out


def _tripped(breaker: Breaker, now: float, config: BreakerConfig) -> Breaker:
    """A closed breaker whose window is over the threshold opens."""
    if breaker.state == CLOSED:
        total, failed = breaker.counts(now, config)
        if total >= config.min_calls and failed / total > config.failure_ratio:
            return replace(breaker, state=OPEN, opened_at=now, trial_started_at=None)
    return breaker


def allow(breaker: Breaker, now: float, config: BreakerConfig) -> tuple[Breaker, bool]:
    """May a call go to the provider now? Returns the (possibly moved-on) state and the answer."""
    if breaker.state == CLOSED:
        return breaker, True
    if breaker.state == OPEN:
        if breaker.opened_at is not None and now - breaker.opened_at >= config.cooldown_s:
            return replace(breaker, state=HALF_OPEN, trial_started_at=now), True
        return breaker, False
    # half-open: one trial at a time
    if breaker.trial_started_at is None or now - breaker.trial_started_at >= config.trial_timeout_s:
        return replace(breaker, trial_started_at=now), True
    return breaker, False


def record(breaker: Breaker, ok: bool, now: float, config: BreakerConfig) -> Breaker:
    """Count one call's outcome and move the state accordingly."""
    if breaker.state == HALF_OPEN:
        if ok:
            return Breaker(state=CLOSED)
        return Breaker(state=OPEN, buckets=_pruned(breaker.buckets, now, config), opened_at=now)
    return merge(breaker, {bucket_key(now, config): [1, 0 if ok else 1]}, now, config)


def merge(breaker: Breaker, counts: dict[str, list[int]], now: float, config: BreakerConfig) -> Breaker:
    """Add outcomes counted elsewhere ({bucket start: [calls, failures]}) to the window; a closed
    breaker then over the threshold opens. Counts never decide a half-open trial: only `record` does."""
    if not counts:
        return breaker
    buckets = _pruned(add_counts(breaker.buckets, counts), now, config)
    return _tripped(replace(breaker, buckets=buckets), now, config)


def release_trial(breaker: Breaker) -> Breaker:
    """The half-open trial call ended without a verdict on the provider (it was refused as a bad
    request): free the slot so the next call becomes the trial, instead of waiting trial_timeout_s."""
    if breaker.state == HALF_OPEN and breaker.trial_started_at is not None:
        return replace(breaker, trial_started_at=None)
    return breaker
