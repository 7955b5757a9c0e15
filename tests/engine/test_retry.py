"""RetryPolicy: exponential backoff, its cap, its jitter, and errors that are never retried."""

from __future__ import annotations

import random

import pytest

from workflows.engine.errors import (
    CircuitOpen,
    ConfigError,
    OutboundBlocked,
    PayloadTooLarge,
    PermanentStepError,
    ProviderError,
    StepError,
    StepTimeout,
)
from workflows.engine.retry import RetryPolicy


def test_backoff_doubles_each_attempt_without_jitter() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_s=2, max_backoff_s=1000, jitter=False)
    assert [policy.delay(attempt) for attempt in range(1, 7)] == [2, 4, 8, 16, 32, 64]


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(max_attempts=50, backoff_s=1, max_backoff_s=60, jitter=False)
    assert [policy.delay(attempt) for attempt in (6, 7, 8, 40)] == [32, 60, 60, 60]


def test_attempt_zero_or_below_uses_the_base_delay() -> None:
    policy = RetryPolicy(backoff_s=3, jitter=False)
    assert policy.delay(0) == policy.delay(1) == 3


class Extremes(random.Random):
    """A random source pinned to its lowest or highest value."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def test_jitter_stays_between_half_and_all_of_the_delay() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_s=2, max_backoff_s=100)
    assert policy.delay(3, Extremes(0.0)) == 4
    assert policy.delay(3, Extremes(0.999999)) == pytest.approx(8, abs=1e-4)
    rng = random.Random(1234)
    delays = [policy.delay(3, rng) for _ in range(500)]
    assert all(4 <= d <= 8 for d in delays)
    assert len(set(delays)) > 400  # actually spread, not a constant
    assert min(delays) < 4.5 and max(delays) > 7.5


def test_jitter_respects_the_cap() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_s=1, max_backoff_s=10)
    rng = random.Random(5)
    assert all(5 <= policy.delay(9, rng) <= 10 for _ in range(200))


def test_should_retry_counts_attempts() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.should_retry(1, permanent=False)
    assert policy.should_retry(2, permanent=False)
    assert not policy.should_retry(3, permanent=False)
    assert not policy.should_retry(4, permanent=False)


@pytest.mark.parametrize("error", [
    PermanentStepError("no"), ConfigError("bad config"), OutboundBlocked("ssrf"), PayloadTooLarge("big"),
    CircuitOpen("open"), StepError("explicit", permanent=True), ProviderError("400", permanent=True),
])
def test_permanent_errors_are_never_retried(error: StepError) -> None:
    policy = RetryPolicy(max_attempts=100)
    assert error.permanent
    assert not policy.should_retry(1, error.permanent)


@pytest.mark.parametrize("error", [StepError("flaky"), StepTimeout("slow"), ProviderError("503")])
def test_transient_errors_are_retried_while_attempts_remain(error: StepError) -> None:
    assert not error.permanent
    assert RetryPolicy(max_attempts=2).should_retry(1, error.permanent)


def test_from_node_reads_the_node_retry_block_with_defaults() -> None:
    assert RetryPolicy.from_node({}, default_attempts=4) == RetryPolicy(4, 1.0, 60.0, True)
    policy = RetryPolicy.from_node({"max_attempts": 3, "backoff_s": 0.5, "max_backoff_s": 5, "jitter": False},
                                   default_attempts=4)
    assert policy == RetryPolicy(3, 0.5, 5.0, False)


def test_error_as_dict_carries_code_permanence_and_details() -> None:
    error = StepError("HTTP 503 from x", details={"status": 503})
    assert error.as_dict() == {"code": "step_error", "message": "HTTP 503 from x", "permanent": False, "status": 503}
    assert StepTimeout("t").as_dict()["code"] == "timeout"
    assert OutboundBlocked("o").as_dict() == {"code": "outbound_blocked", "message": "o", "permanent": True}
