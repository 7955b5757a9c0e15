"""The episode log that the Redis outages (workers/redis_outage.py) and the database's failing writes
(database_outage.py) share (workflows/episodes.py): one warning when an episode begins, one when it
ends, whatever the number of failed calls and threads in between."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis

from workflows.database_outage import DatabaseOutage
from workflows.episodes import Episodes
from workflows.workers.redis_outage import Outage


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_both_logs_are_the_shared_episodes() -> None:
    assert issubclass(Outage, Episodes) and issubclass(DatabaseOutage, Episodes)


def test_many_threads_failing_make_one_episode_and_two_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    db = DatabaseOutage(logging.getLogger("test.episodes"), "worker")
    rd = Outage(logging.getLogger("test.episodes"), "worker")

    def fail() -> None:
        for _ in range(50):
            db.failed("step 1: committing its outcome", OSError("No space left on device"), "retrying")
            rd.failed(redis.ConnectionError("refused"))

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.down and rd.down and db.episodes == rd.episodes == 1
    assert db.recovered(time.monotonic()) and rd.recovered(time.monotonic())
    assert not db.recovered() and not rd.recovered()  # nothing to end any more
    lines = warnings(caplog)
    assert len(lines) == 4, lines
    assert "No space left on device" in lines[0] and "Redis unreachable" in lines[1]
    assert "accepts writes again" in lines[2] and "(400 failed attempt(s))" in lines[2]
    assert "Redis reachable again" in lines[3] and "(400 failed attempt(s))" in lines[3]


def test_a_call_begun_before_the_episode_does_not_end_it() -> None:
    episodes = Episodes(logging.getLogger("test.episodes"), "scheduler")
    before = time.monotonic()
    assert episodes.begin() and not episodes.begin()
    assert episodes.end(before) is None and episodes.down
    ended = episodes.end(time.monotonic())
    assert ended is not None and ended.failures == 2 and ended.lasted_s >= 0 and not episodes.down
    assert episodes.begin() and episodes.episodes == 2  # a new episode counts afresh


def test_outcomes_given_up_are_logged_once_a_minute(caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step in flight whose commit the database refused for half a lease used to log a warning and
    fail its job with a traceback; now one line a minute at most, however the episodes come and go (a
    full disk flaps: writes that need no space succeed in between), saying how many went quietly."""
    caplog.set_level(logging.DEBUG)
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    db = DatabaseOutage(logging.getLogger("test.episodes"), "worker")
    refused = OSError("No space left on device")
    for _ in range(3):  # three short episodes within the minute
        db.failed("step 1: committing its outcome", refused, "retrying")
        for pk in range(5):
            db.gave_up(f"step {pk}", 1.5, refused)
        db.recovered()
        clock[0] += 5
    clock[0] += 60
    db.gave_up("step 9", 1.5, refused)
    assert db.given_up == 16
    given_up = [m for m in warnings(caplog) if "gave up committing its outcome" in m]
    assert len(given_up) == 2, given_up
    assert given_up[0].startswith("step 0: gave up committing its outcome after 1.5 s (OSError: No space left")
    assert given_up[1].endswith("not logged one by one; 14 more given up quietly since the last such line)")


def test_a_database_episode_that_comes_back_within_a_minute_is_not_logged_again(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk comes and goes: writes that need no space succeed in between, ending the episode. Each
    new beginning within a minute of the last end is the same trouble (CI's disk-full run logged 9
    'committing its outcome failed' lines); one a minute later is news again."""
    caplog.set_level(logging.DEBUG)
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    db = DatabaseOutage(logging.getLogger("test.episodes"), "worker")
    refused = OSError("No space left on device")
    for _ in range(4):
        assert db.failed("step 1: committing its outcome", refused, "retrying")
        clock[0] += 1
        assert db.recovered()
        clock[0] += 1
    clock[0] += 61
    db.failed("step 2: committing its outcome", refused, "retrying")
    began = [m for m in warnings(caplog) if "committing its outcome failed" in m]
    assert [m.split(":")[0] for m in began] == ["worker", "worker"], began
    assert "step 2" in began[1] and db.episodes == 5
