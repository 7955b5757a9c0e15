"""The ai consumer's claims when the database fails them (a crash, a full disk): nothing is taken, the
job ends without a traceback (the step stays queued and the reconciler dispatches it again), and the
failure is logged once per episode with the workers' (workflows/database_outage.py), not once per job.
The consumer's other paths under a database crash run in tests/faults/test_database_crash.py."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import OperationalError

from workflows.database_outage import DatabaseOutage
from workflows.runtime import loop
from workflows.workers.ai_steps import StepJobs

pytestmark = pytest.mark.django_db(transaction=True)


def consumer(pool: ThreadPoolExecutor) -> StepJobs:
    """The consumer's step jobs with a database thread pool of one (no other pool, commits or stop needed)."""
    return StepJobs("ai-test", pool, pool, None, lambda: False)  # type: ignore[arg-type]


@pytest.fixture
def database_away(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def refuse(*args: Any) -> Any:
        calls.append("claim")
        raise OperationalError("connection failed: server closed the connection unexpectedly")

    for name in ("claim_step", "claim_steps"):
        monkeypatch.setattr(f"workflows.runtime.loop.{name}", refuse)
        monkeypatch.setattr(f"workflows.runtime.{name}", refuse)
    monkeypatch.setattr(loop, "database_outage", DatabaseOutage(logging.getLogger("steadyflow.runtime"), "worker"))
    return calls


def test_failed_claims_take_nothing_and_are_logged_once(database_away: list[str],
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="steadyflow.runtime")

    async def claims() -> list[Any]:
        with ThreadPoolExecutor(1) as pool:
            me = consumer(pool)
            single = [await me.claim(SimpleNamespace(claims=None), pk) for pk in (11, 12)]  # type: ignore[arg-type]
            # A round of jobs claimed together, then each job looks for its own step among them.
            job = SimpleNamespace(claims=me.claim_all([13, 14]))
            return [*single, await me.claim(job, 13)]  # type: ignore[arg-type]

    assert asyncio.run(claims()) == [None, None, None]
    assert len(database_away) == 3
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "claiming step 11 failed" in warnings[0].getMessage()
    assert "dispatched again by the reconciler" in warnings[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
