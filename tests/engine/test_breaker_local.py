"""The circuit breaker's per-process side (engine/breaker_local.py) and the logic it feeds
(merge, release_trial): plain Python with the clock passed in, no database."""

from __future__ import annotations

import threading

from workflows.engine import breaker
from workflows.engine.breaker_local import LocalCounts

CONFIG = breaker.BreakerConfig(failure_ratio=0.5, window_s=60, min_calls=5, cooldown_s=30, bucket_s=5)
T0 = 1000.0


def test_outcomes_are_counted_per_window_bucket_until_taken() -> None:
    local = LocalCounts()
    for ok, at in [(True, T0), (True, T0 + 1), (False, T0 + 4), (True, T0 + 5)]:
        local.add(ok, at, CONFIG)
    assert local.has_pending()
    assert local.take() == {"1000": [3, 1], "1005": [1, 0]}
    assert not local.has_pending()
    assert local.take() == {}


def test_counts_given_back_after_a_failed_write_are_not_lost() -> None:
    local = LocalCounts()
    local.add(True, T0, CONFIG)
    taken = local.take()
    local.add(False, T0 + 1, CONFIG)
    local.give_back(taken)
    assert local.take() == {"1000": [2, 1]}


def test_successes_and_rare_failures_wait_for_the_periodic_write() -> None:
    local = LocalCounts()
    local.seen(breaker.Breaker(buckets={"1000": [20, 1]}), T0, written=True)
    assert not local.add(True, T0 + 1, CONFIG)
    assert not local.add(False, T0 + 1, CONFIG)  # 2 failures of 22 known calls
    assert not local.due(T0 + 0.5, every_s=1.0)
    assert local.due(T0 + 1.0, every_s=1.0)


def test_a_failure_that_may_open_the_breaker_is_written_at_once() -> None:
    local = LocalCounts()
    # Never seen the row: the first failure is all it knows, over the ratio (min_calls aside: other
    # processes' calls may make up the minimum).
    assert local.add(False, T0, CONFIG)
    local.take()
    local.seen(breaker.Breaker(buckets={"1000": [4, 1]}), T0, written=True)
    assert not local.add(False, T0 + 1, CONFIG)  # 2 of 5
    assert not local.add(False, T0 + 2, CONFIG)  # 3 of 6: not more than 0.5
    assert local.add(False, T0 + 3, CONFIG)  # 4 of 7


def test_counts_older_than_the_window_do_not_make_a_failure_urgent() -> None:
    local = LocalCounts()
    local.seen(breaker.Breaker(buckets={str(int(T0)): [10, 0]}), T0, written=True)
    assert not local.add(False, T0 + 1, CONFIG)
    later = T0 + 200  # the 10 successes (and that failure) left the window
    local.take()
    local.seen(breaker.Breaker(buckets={"1000": [10, 1]}), later, written=True)
    assert local.add(False, later, CONFIG)


def test_no_urgency_while_the_breaker_is_open() -> None:
    local = LocalCounts()
    local.seen(breaker.Breaker(state=breaker.OPEN, opened_at=T0), T0)
    assert not local.add(False, T0 + 1, CONFIG)
    assert local.last_state() == breaker.OPEN


def test_the_cached_state_expires() -> None:
    local = LocalCounts()
    assert local.fresh(T0, 0.25) is None
    assert local.last_state() == breaker.CLOSED
    state = breaker.Breaker(state=breaker.OPEN, opened_at=T0)
    local.seen(state, T0)
    assert local.fresh(T0 + 0.2, 0.25) == state
    assert local.fresh(T0 + 0.25, 0.25) is None
    assert not local.due(T0 + 5, every_s=1.0)  # nothing pending


def test_only_one_thread_claims_the_periodic_write() -> None:
    local = LocalCounts()
    assert local.begin_write()
    assert not local.begin_write()
    local.end_write()
    assert local.begin_write()


def test_counting_from_many_threads_loses_nothing() -> None:
    local = LocalCounts()
    written: list[dict[str, list[int]]] = []

    def work() -> None:
        for i in range(2000):
            local.add(i % 10 != 0, T0, CONFIG)
            if i % 500 == 0:
                written.append(local.take())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written.append(local.take())
    total = breaker.add_counts({}, {})
    for counts in written:
        total = breaker.add_counts(total, counts)
    assert total == {"1000": [16000, 1600]}


# --- merge and release_trial -----------------------------------------------------------------------

def test_merged_counts_open_the_breaker_like_single_records() -> None:
    one_by_one = breaker.Breaker()
    for ok in [True, False, False, True, False, False]:
        one_by_one = breaker.record(one_by_one, ok, T0 + 3, CONFIG)
    merged = breaker.merge(breaker.Breaker(), {"1000": [6, 4]}, T0 + 3, CONFIG)
    assert merged == one_by_one
    assert merged.state == breaker.OPEN and merged.opened_at == T0 + 3


def test_merge_respects_min_calls_and_the_ratio() -> None:
    assert breaker.merge(breaker.Breaker(), {"1000": [4, 4]}, T0, CONFIG).state == breaker.CLOSED
    assert breaker.merge(breaker.Breaker(), {"1000": [10, 5]}, T0, CONFIG).state == breaker.CLOSED
    assert breaker.merge(breaker.Breaker(), {"1000": [10, 6]}, T0, CONFIG).state == breaker.OPEN


def test_merged_counts_never_decide_a_half_open_trial() -> None:
    trial = breaker.Breaker(state=breaker.HALF_OPEN, opened_at=T0, trial_started_at=T0 + 31)
    assert breaker.merge(trial, {"1030": [3, 0]}, T0 + 32, CONFIG).state == breaker.HALF_OPEN
    assert breaker.merge(trial, {"1030": [3, 3]}, T0 + 32, CONFIG).state == breaker.HALF_OPEN


def test_merge_drops_counts_older_than_the_window() -> None:
    merged = breaker.merge(breaker.Breaker(buckets={"900": [5, 5]}), {"800": [1, 1], "1000": [1, 0]}, T0,
                           CONFIG)
    assert merged.buckets == {"1000": [1, 0]}


def test_a_released_trial_frees_the_slot_for_the_next_call() -> None:
    opened = breaker.Breaker(state=breaker.OPEN, opened_at=T0)
    trial, allowed = breaker.allow(opened, T0 + 31, CONFIG)
    assert allowed and trial.state == breaker.HALF_OPEN
    assert breaker.allow(trial, T0 + 32, CONFIG)[1] is False
    released = breaker.release_trial(trial)
    assert released.state == breaker.HALF_OPEN
    assert breaker.allow(released, T0 + 32, CONFIG)[1] is True
    assert breaker.release_trial(opened) == opened
