"""Group commits for the ai consumer: the outcomes of LLM calls that finish within a few
milliseconds of each other (or a few dozen of them, whichever comes first) commit together, in one
transaction and, on PostgreSQL, one round trip (runtime.finish_groups). Hundreds of calls that
end at about the same time then cost a handful of commits instead of one each.

Each outcome's task awaits its own result; an error of the group's commit is every member's error
(each is then the job's failure, as a failed commit was before). No successor is claimed for inline
running here (the ai consumer's successors go to their own queues).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from workflows import runtime

# runs a blocking call in the consumer's database pool, awaitable on the loop
InPool = Callable[..., Awaitable[Any]]


class GroupCommits:
    def __init__(self, in_pool: InPool, *, window_s: float, most: int) -> None:
        self.in_pool = in_pool
        self.window_s = window_s
        self.most = max(1, most)
        self.pending: list[tuple[runtime.Claim, runtime.Outcome, asyncio.Future[None]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.commits = 0  # group commits made (for tests and logs)

    async def finish(self, claim: runtime.Claim, outcome: runtime.Outcome) -> None:
        """Commit this outcome with the others of its window."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self.pending.append((claim, outcome, done))
        if len(self.pending) >= self.most or self.window_s <= 0:
            self.flush()
        elif self.timer is None:
            self.timer = loop.call_later(self.window_s, self.flush)
        return await done

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending, []
        if batch:
            task = asyncio.ensure_future(self._commit(batch))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _commit(self, batch: list[tuple[runtime.Claim, runtime.Outcome, asyncio.Future[None]]]) -> None:
        # One group per instance: two calls of one instance decide together, in order.
        by_instance: dict[int, list[int]] = {}
        for index, (claim, _, _) in enumerate(batch):
            by_instance.setdefault(claim.instance.pk, []).append(index)
        groups = [([batch[i][0] for i in members], [batch[i][1] for i in members]) for members in by_instance.values()]
        try:
            await self.in_pool(runtime.finish_groups_reconnecting, groups)
        except BaseException as exc:
            for _, _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.commits += 1
        for _, _, done in batch:
            if not done.done():
                done.set_result(None)
