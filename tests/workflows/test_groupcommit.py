"""The ai consumer's group commits: outcomes finished within the window (or `most` of them) commit in
one call, grouped by instance; a failing commit is every member's error."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from workflows.workers.groupcommit import GroupCommits


def claim(instance_id: int, step_id: int) -> Any:
    return SimpleNamespace(instance=SimpleNamespace(pk=instance_id), step=SimpleNamespace(pk=step_id))


class Pool:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[tuple[list[int], list[str]]]] = []
        self.fail = fail

    async def __call__(self, fn: Any, groups: list[tuple[list[Any], list[Any]]]) -> None:
        self.calls.append([([c.step.pk for c in claims], outcomes) for claims, outcomes in groups])
        if self.fail:
            raise RuntimeError("database gone")


def test_outcomes_within_the_window_commit_once_grouped_by_instance() -> None:
    pool = Pool()

    async def go() -> None:
        commits = GroupCommits(pool, window_s=0.05, most=50)
        await asyncio.gather(commits.finish(claim(1, 10), "o10"), commits.finish(claim(2, 20), "o20"),
                             commits.finish(claim(1, 11), "o11"))
        assert commits.commits == 1

    asyncio.run(go())
    assert pool.calls == [[([10, 11], ["o10", "o11"]), ([20], ["o20"])]]


def test_most_outcomes_flush_without_waiting_for_the_window() -> None:
    pool = Pool()

    async def go() -> None:
        commits = GroupCommits(pool, window_s=60.0, most=2)
        await asyncio.wait_for(asyncio.gather(commits.finish(claim(1, 1), "a"), commits.finish(claim(2, 2), "b")),
                               timeout=5)

    asyncio.run(go())
    assert len(pool.calls) == 1


def test_a_failed_group_commit_fails_every_member() -> None:
    pool = Pool(fail=True)

    async def go() -> list[Any]:
        commits = GroupCommits(pool, window_s=0.01, most=50)
        return await asyncio.gather(commits.finish(claim(1, 1), "a"), commits.finish(claim(2, 2), "b"),
                                    return_exceptions=True)

    results = asyncio.run(go())
    assert [str(r) for r in results] == ["database gone", "database gone"]
    assert all(isinstance(r, RuntimeError) for r in results)


@pytest.mark.parametrize("window", [0.0])
def test_no_window_commits_each_outcome_alone(window: float) -> None:
    pool = Pool()

    async def go() -> None:
        commits = GroupCommits(pool, window_s=window, most=50)
        await asyncio.gather(commits.finish(claim(1, 1), "a"), commits.finish(claim(2, 2), "b"))

    asyncio.run(go())
    assert len(pool.calls) == 2
