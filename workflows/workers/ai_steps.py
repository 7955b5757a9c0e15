"""One step job of the ai consumer (workflows/workers/aiworker.py), on its event loop: what
`workflows.jobs.run_step` does in a synchronous worker, with the handler awaited. Claim the step (with
the other steps of its dequeue round where the store can: one statement), build its call in a database
thread, await `kind.arun(call)` under the node's timeout (a synchronous kind runs in a thread), and commit
the outcome with the others of the same few milliseconds (groupcommit.py). A consumer that is stopping
cancels the calls in flight: their steps are released, not failed.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from workflows import runtime
from workflows.engine.errors import StepTimeout
from workflows.live import partial as live_partial
from workflows.observability import metrics
from workflows.workers import dispatch, rq_adapter
from workflows.workers.groupcommit import GroupCommits

log = logging.getLogger("steadyflow.aiworker")

T = TypeVar("T")

RELEASE_REASON = "the ai consumer stopped before the call finished"


def in_pool(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Run a blocking call in `pool`; awaitable on the loop. The context (current RQ job) goes along."""
    context = contextvars.copy_context()
    return asyncio.wrap_future(pool.submit(context.run, fn, *args, **kwargs))


@dataclass(eq=False)
class InFlight:
    running: rq_adapter.Running
    claims: asyncio.Future[list[runtime.Claim]] | None = None  # the claim of its dequeue round
    claim: runtime.Claim | None = None
    handler: asyncio.Future[Any] | None = None  # the handler's await: what a stop past the grace cancels
    released: bool = False



class StepJobs:
    """Runs step jobs on the consumer's loop with its thread pools (`db`: ORM work, `sync`: synchronous
    node kinds) and its group commits; `releasing()` says the consumer is giving calls back."""

    def __init__(self, name: str, db: ThreadPoolExecutor, sync: ThreadPoolExecutor, commits: GroupCommits,
                 releasing: Callable[[], bool]) -> None:
        self.name = name
        self.db = db
        self.sync = sync
        self.commits = commits
        self.releasing = releasing

    async def perform(self, job: InFlight) -> Any:
        """What `workflows.jobs.run_step` does, with the handler awaited on this loop."""
        rq_job = job.running.job
        if rq_job.func_name != dispatch.JOB_FUNC:
            # Not a step job: run it as RQ would, in a thread (perform() runs a coroutine function
            # with asyncio.run there), under its own RQ timeout.
            timeout = rq_job.timeout if rq_job.timeout and rq_job.timeout > 0 else None
            return await asyncio.wait_for(in_pool(self.sync, rq_job.perform), timeout)
        step_id = int(rq_job.args[0])
        claim = await self.claim(job, step_id)
        ran = 0
        while claim is not None:
            job.claim = claim
            runtime.current_step.set(claim)  # this task's log lines name the step
            outcome = await self.attempt(job, claim)
            if outcome is None:
                await in_pool(self.db, runtime.release_step, claim, RELEASE_REASON)
                job.released = True
                return ran
            ran += 1
            # Committed with the other outcomes of these few milliseconds (a dropped connection
            # is retried while the lease holds, so the call's result is not thrown away).
            await self.commits.finish(claim, outcome)
            claim = None  # no inline successor on this queue (ALLOW_INLINE)
        job.claim = None
        return ran

    # A claim the database fails (away, or refusing writes) takes nothing: the steps stay queued for the
    # reconciler, and the failure is logged once per episode with the workers' (runtime/loop.py).
    def claim_all(self, step_ids: list[int]) -> asyncio.Future[list[runtime.Claim]]:
        return in_pool(self.db, runtime.claim_steps_quietly, step_ids, self.name)

    async def claim(self, job: InFlight, step_id: int) -> runtime.Claim | None:
        if job.claims is not None:
            try:
                claims = await asyncio.shield(job.claims)
            except Exception:  # noqa: BLE001 - the round's claim failed: this job claims its own step
                log.exception("ai consumer %s: claiming a round of jobs failed; claiming step %s alone",
                              self.name, step_id)
            else:
                # Not among them: someone else has it, or it is no longer due (as claim_step says).
                return next((claim for claim in claims if claim.step.pk == step_id), None)
        return await in_pool(self.db, runtime.claim_step_quietly, step_id, self.name)

    async def attempt(self, job: InFlight, claim: runtime.Claim) -> runtime.Outcome | None:
        """One attempt of a claimed step, as runtime.run_claimed runs it; None when the consumer is
        stopping and the call was cancelled (or not started): the step is then released."""
        timeout = runtime.timeout_for(claim)
        kind = claim.kind
        handler: asyncio.Future[Any] | None = None
        partials: live_partial.PartialThrottle | None = None
        metrics.LLM_IN_FLIGHT.inc()
        try:
            # The config's templates render inside the step's time limit, as in run_claimed.
            async with asyncio.timeout(timeout):
                call = await in_pool(self.db, runtime.build_call, claim)
                # A streaming llm node's partial replies go to the live view, throttled.
                partials = live_partial.attach(call, claim.instance.pk, claim.step.pk)
                if self.releasing():
                    return None
                if kind.is_async:
                    handler = asyncio.ensure_future(kind.arun(call))
                else:
                    handler = in_pool(self.sync, kind.run, call)
                job.handler = handler
                result = await handler
        except TimeoutError:
            # time_limit's message in the synchronous workers.
            message = f"step {claim.node.id} exceeded its timeout of {timeout:g} s"
            return runtime.Outcome(error=StepTimeout(message))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if (self.releasing() and handler is not None and handler.cancelled() and task is not None
                    and not task.cancelling()):
                return None
            raise
        except Exception as exc:  # noqa: BLE001 - a failing node must never take the consumer down
            return runtime.Outcome(error=runtime.as_step_error(exc))
        finally:
            if partials is not None:
                partials.close()
            job.handler = None
            metrics.LLM_IN_FLIGHT.dec()
        return runtime.Outcome(result=result)
