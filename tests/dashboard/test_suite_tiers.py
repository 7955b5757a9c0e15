"""The suite's own plumbing for parallel runs (docs/TESTING.md): a Redis database per pytest-xdist worker, and
the markers that split the suite into its two tiers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.settings import redis_url_for_worker


@pytest.mark.parametrize(("url", "worker", "expected"), [
    ("redis://127.0.0.1:6379/1", "gw0", "redis://127.0.0.1:6379/2"),
    ("redis://127.0.0.1:6379/1", "gw1", "redis://127.0.0.1:6379/3"),
    ("redis://:secret@redis:6379", "gw0", "redis://:secret@redis:6379/1"),
    ("unix:///work/var/redis.sock", "gw1", "unix:///work/var/redis.sock?db=2"),
    ("unix:///work/var/redis.sock?db=3", "gw0", "unix:///work/var/redis.sock?db=4"),
])
def test_each_worker_gets_a_redis_database_of_its_own(url: str, worker: str, expected: str) -> None:
    assert redis_url_for_worker(url, worker) == expected


def test_running_out_of_redis_databases_is_an_error_naming_the_way_out() -> None:
    with pytest.raises(RuntimeError, match="fewer"):
        redis_url_for_worker("redis://127.0.0.1:6379/14", "gw1")


def test_a_test_with_a_worker_process_is_in_the_serial_tier(request: Any) -> None:
    from tests.conftest import SERIAL_FIXTURES

    assert request.node.get_closest_marker("serial") is None
    assert {"processes", "worker_env", "live_server", "page"} <= SERIAL_FIXTURES


@pytest.mark.parametrize("assigned", [False, True])
def test_a_process_a_test_starts_keeps_the_test_s_redis_database(assigned: bool) -> None:
    """A worker or scheduler a test starts inherits PYTEST_XDIST_WORKER and the test's REDIS_URL and loads
    tests/settings.py again: it must talk to the same Redis database as the test, not the next one."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw1", "REDIS_URL": "redis://127.0.0.1:6379/1"}
    env.pop("STEADYFLOW_TEST_REDIS_FOR", None)
    if assigned:  # what the test process's environment holds once its settings assigned the database
        env["STEADYFLOW_TEST_REDIS_FOR"] = "gw1"
    read = subprocess.run([sys.executable, "-c", "import tests.settings, os; print(os.environ['REDIS_URL'])"],
                          env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          check=True)
    assert read.stdout.strip() == ("redis://127.0.0.1:6379/1" if assigned else "redis://127.0.0.1:6379/3")
