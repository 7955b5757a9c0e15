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
