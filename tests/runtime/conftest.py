"""Fixtures of the in-process runtime tests: the jobs a transition would enqueue, captured instead of
sent to RQ, so a test runs each step itself (runtime.run_step) in the order it chooses."""

from __future__ import annotations

import pytest

from workflows.workers import dispatch


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """(step id, queue) of every job enqueued after a commit, in order; nothing reaches Redis."""
    sent: list[tuple[int, str]] = []

    def capture(items: list[tuple[int, str]], **options: object) -> int:
        sent.extend(items)
        return len(items)

    monkeypatch.setattr(dispatch, "enqueue_steps", capture)
    return sent


@pytest.fixture
def enqueued(jobs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return jobs
