"""`python -m bench.fastpath_prototype`: a measurement-only prototype of a cheaper step commit.

NOT used by the product: nothing imports it. It exists to measure, on the same throwaway database,
what the hot path would gain if `finish_step`'s common case (a step succeeded, exactly one successor
on the same queue, claimed inline) were written with hand-written SQL instead of the ORM, while
writing exactly the same rows (step succeeded, next step created already claimed, three events, a
checkpoint, the instance's state/counters), under the same row lock (raw2) or an optimistic guard
(raw1).

Variants, each running chains of no-op steps serially in-process like `bench.profile`:
- orm        executor.finish_step as it is (today's path);
- raw2       psycopg pipeline, 2 round trips: [BEGIN + SELECT instance FOR UPDATE + lease check],
             Python decides, then [one INSERT/UPDATE CTE + COMMIT];
- raw1       optimistic, 1 round trip in autocommit: one CTE guarded by the instance's event_seq and
             the step's lease (a guard violation aborts the statement; the caller would then take the
             slow path).
Anything outside the common case (the last step's end node, errors, conditions, fan-out) falls back to
executor.finish_step, so the figures include those fallbacks.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone  # reads no settings at import

from bench.harness import ROOT, Cluster, make_database, note

LOCK_SQL = """
SELECT i.status, i.event_seq, i.loop_count, i.open_steps, i.max_transitions, i.state, i.context,
       EXISTS (SELECT 1 FROM workflows_steprun s
                WHERE s.id = %(step)s AND s.status = 'running' AND s.lease_token = %(token)s)
  FROM workflows_workflowinstance i WHERE i.id = %(instance)s FOR UPDATE OF i
"""

# Every write of the common case in one statement. The $placeholders are empty for raw2 (the row
# lock already holds) and the optimistic guards for raw1.
WRITE_SQL = """
WITH inst AS (
  UPDATE workflows_workflowinstance
     SET state = %(state)s, loop_count = %(loop_count)s, open_steps = %(open_steps)s,
         event_seq = %(seq)s, updated_at = %(now)s
   WHERE id = %(instance)s $inst_guard
  RETURNING id
), done AS (
  UPDATE workflows_steprun
     SET status = 'succeeded', output = %(output)s, usage = %(usage)s, finished_at = %(now)s,
         input = %(input)s, error = NULL, degraded = %(degraded)s
   WHERE id = %(step)s $step_guard
  RETURNING id
), nxt AS (
  INSERT INTO workflows_steprun (instance_id, node_id, node_type, visit, attempt, status, queue, worker,
      lease_token, lease_until, due_at, idempotency_key, trace_id, created_at, started_at, heartbeat_at,
      degraded)
  SELECT %(instance)s, %(next_node)s, %(next_type)s, %(next_visit)s, 1, 'running', %(queue)s, %(worker)s,
         %(next_token)s, %(lease_until)s, %(now)s, %(next_key)s, %(trace)s, %(now)s, %(now)s, %(now)s, false
   $nxt_from
  RETURNING id
), ev AS (
  INSERT INTO workflows_event (instance_id, seq, type, node_id, step_id, payload, trace_id, created_at)
  SELECT %(instance)s, e.seq, e.type, e.node_id, CASE WHEN e.next THEN nxt.id ELSE %(step)s END,
         e.payload, %(trace)s, %(now)s
    FROM jsonb_to_recordset(%(events)s) AS e(seq int, type text, node_id text, next bool, payload jsonb),
         nxt
), ck AS (
  INSERT INTO workflows_checkpoint (instance_id, seq, state, checksum, created_at)
  SELECT %(instance)s, %(seq)s, %(checkpoint)s, %(checksum)s, %(now)s FROM nxt
)
SELECT $result
"""

RAW2_SQL = (WRITE_SQL.replace("$inst_guard", "").replace("$step_guard", "").replace("$nxt_from", "")
            .replace("$result", "(SELECT id FROM nxt)"))
# raw1: the instance must be as this worker left it (event_seq) and still running; the step's lease
# must hold; the step and the next one are written only when the instance update went through. A
# violation divides by zero, which aborts the whole statement (nothing is written).
RAW1_SQL = (WRITE_SQL
            .replace("$inst_guard", "AND event_seq = %(expected_seq)s AND status IN ('running', 'pending') "
                     "AND EXISTS (SELECT 1 FROM workflows_steprun s WHERE s.id = %(step)s "
                     "AND s.status = 'running' AND s.lease_token = %(token)s)")
            .replace("$step_guard", "AND status = 'running' AND lease_token = %(token)s "
                     "AND EXISTS (SELECT 1 FROM inst)")
            .replace("$nxt_from", "FROM done")
            .replace("$result", "CASE WHEN (SELECT count(*) FROM done) = 1 THEN (SELECT id FROM nxt) "
                     "ELSE 1 / (SELECT count(*) FROM done) - 1 END"))


class FastPath:
    """finish_step's common case in hand-written SQL. `finish` returns the inline successor's claim,
    or None after falling back to executor.finish_step (or when the chain ended)."""

    def __init__(self, optimistic: bool) -> None:
        self.optimistic = optimistic
        self.fallbacks = 0
        self.fast = 0
        self.sql_s = 0.0  # time inside psycopg for the fast commits (round trips + server)

    def finish(self, claim: Any, outcome: Any) -> Any:
        from django.db import connection

        from workflows import executor

        if not self._eligible(claim, outcome):
            self.fallbacks += 1
            return executor.finish_step(claim, outcome, allow_inline=True)
        import psycopg

        connection.ensure_connection()
        raw = connection.connection
        now = timezone.now()
        if self.optimistic:
            inst = claim.instance
            expected_seq = inst.event_seq
            plan = self._plan(claim, outcome, copy.deepcopy(inst.state), inst.event_seq, inst.loop_count,
                              inst.open_steps, inst.max_transitions, inst.context, now)
            if plan is None:
                self.fallbacks += 1
                return executor.finish_step(claim, outcome, allow_inline=True)
            params, new_claim, messages = plan
            params["expected_seq"] = expected_seq
            try:
                t = time.perf_counter()
                with raw.cursor() as cur:
                    cur.execute(RAW1_SQL, params)
                    row = cur.fetchone()
                self.sql_s += time.perf_counter() - t
            except psycopg.errors.DivisionByZero:
                # A guard failed (someone else moved the instance, or the lease is gone): nothing
                # was written; the ORM path re-reads under the lock and decides.
                self.fallbacks += 1
                inst.refresh_from_db()
                return executor.finish_step(claim, outcome, allow_inline=True)
        else:
            # Pipeline mode: BEGIN goes with the locking SELECT (one round trip), the write statement
            # with COMMIT (a second one); the result is read once the pipeline has synced.
            t = time.perf_counter()
            with raw.cursor() as cur:
                with raw.pipeline(), raw.transaction():
                    cur.execute(LOCK_SQL, {"instance": claim.instance.pk, "step": claim.step.pk,
                                           "token": claim.token})
                    status, seq, loop_count, open_steps, max_tr, state, context, lease_ok = cur.fetchone()
                    # Django's connection loads jsonb as text (the ORM decodes it itself).
                    state, context = json.loads(state), json.loads(context)
                    t_plan = time.perf_counter()
                    if status != "running" or not lease_ok:
                        plan = None
                    else:
                        plan = self._plan(claim, outcome, state, seq, loop_count, open_steps, max_tr, context, now)
                    if plan is not None:
                        params, new_claim, messages = plan
                        cur.execute(RAW2_SQL, params)
                    t_plan = time.perf_counter() - t_plan
                if plan is not None:
                    row = cur.fetchone()
            self.sql_s += time.perf_counter() - t - t_plan
            if plan is None:
                self.fallbacks += 1
                return executor.finish_step(claim, outcome, allow_inline=True)
        self.fast += 1
        new_claim.step.pk = new_claim.step.id = row[0]
        for message in messages:
            if message["step"] is None:
                message["step"] = row[0]
        from workflows import live

        live.publish(messages)
        return new_claim

    @staticmethod
    def _eligible(claim: Any, outcome: Any) -> bool:
        result = outcome.result
        return (outcome.error is None and result is not None and result.defer_until is None
                and not result.context_updates and not result.usage
                and all(edge.when is None for edge in claim.graph.outgoing(claim.node.id)))

    def _plan(self, claim: Any, outcome: Any, state: dict[str, Any], seq: int, loop_count: int,
              open_steps: int, max_transitions: int, context: dict[str, Any],
              now: datetime) -> tuple[dict[str, Any], Any, list[Any]] | None:
        import secrets

        from psycopg.types.json import Jsonb

        from workflows import executor
        from workflows.engine.nodes import get_kind
        from workflows.engine.scheduling import advance, count_activations, edges_fired
        from workflows.models import Checkpoint, StepRun

        graph, step, inst = claim.graph, claim.step, claim.instance
        result = outcome.result
        try:
            executor._check_payload(f"output of step {claim.node.id}", result.output)
        except Exception:  # noqa: BLE001 - PayloadTooLarge: the ORM path fails the step properly
            return None
        fired = edges_fired(graph, step.node_id, lambda e: True)
        decision = advance(graph, state.setdefault("joins", {}), step.node_id, fired)
        if len(decision.activate) != 1 or decision.skipped:
            return None
        next_id = decision.activate[0]
        node = graph.nodes[next_id]
        kind = get_kind(node.type)
        if kind.structural or kind.awaits_person or kind.is_async or executor.queue_for(node, kind) != step.queue:
            return None
        check = count_activations(loop_count, 1, max_transitions)
        if not check.allowed:
            return None
        visits = state.setdefault("visits", {})
        visit = visits.get(next_id, 0) + 1
        visits[next_id] = visit
        trail = state.setdefault("trail", [])
        trail.append(next_id)
        del trail[:-executor.TRAIL_LENGTH]
        token = secrets.token_hex(8)
        duration = round((now - step.started_at).total_seconds() * 1000, 2) if step.started_at else None
        events = [
            {"seq": seq + 1, "type": "step_succeeded", "node_id": step.node_id, "next": False,
             "payload": {"visit": step.visit, "attempt": step.attempt, "duration_ms": duration, "usage": None,
                         "degraded": result.degraded}},
            {"seq": seq + 2, "type": "edges_taken", "node_id": step.node_id, "next": False,
             "payload": {"edges": decision.fired_edges}},
            {"seq": seq + 3, "type": "step_started", "node_id": next_id, "next": True,
             "payload": {"visit": visit, "attempt": 1, "worker": claim.worker, "queue": step.queue}},
        ]
        new_seq = seq + 3
        new_open = open_steps  # one finished, one started
        checkpoint = {"context": context, "state": state, "loop_count": check.loop_count,
                      "open_steps": new_open, "status": "running", "seq": new_seq}
        lease_until = now + timedelta(seconds=executor.conf("LEASE_S"))
        params = {
            "instance": inst.pk, "step": step.pk, "token": claim.token, "now": now,
            "state": Jsonb(state), "loop_count": check.loop_count, "open_steps": new_open, "seq": new_seq,
            "output": Jsonb(result.output), "usage": None,
            "input": Jsonb(executor._redacted_input(claim)), "degraded": result.degraded,
            "next_node": next_id, "next_type": node.type, "next_visit": visit, "queue": step.queue,
            "worker": claim.worker, "next_token": token, "lease_until": lease_until,
            "next_key": f"{inst.pk}:{next_id}:{visit}", "trace": inst.trace_id,
            "events": Jsonb(events), "checkpoint": Jsonb(checkpoint),
            "checksum": Checkpoint.checksum_of(checkpoint),
        }
        # The in-memory instance now mirrors the row, so the next inline step can skip re-reading it.
        inst.state, inst.context, inst.loop_count, inst.open_steps, inst.event_seq = (
            state, context, check.loop_count, new_open, new_seq)
        new_step = StepRun(instance=inst, node_id=next_id, node_type=node.type, visit=visit, attempt=1,
                           status="running", queue=step.queue, worker=claim.worker, lease_token=token,
                           lease_until=lease_until, due_at=now, idempotency_key=params["next_key"],
                           trace_id=inst.trace_id, created_at=now, started_at=now, heartbeat_at=now)
        new_claim = executor.Claim(step=new_step, instance=inst, graph=graph, node=node, kind=kind, token=token,
                                   worker=claim.worker)
        messages = [{"instance": inst.pk, "seq": e["seq"], "type": e["type"], "node": e["node_id"],
                     "step": None if e["next"] else step.pk, "payload": e["payload"], "at": now.isoformat()}
                    for e in events]
        return params, new_claim, messages


def run_variant(name: str, finish: Callable[[Any, Any], Any], chains: int, length: int) -> dict[str, Any]:
    from bench import workloads as wl
    from workflows import executor
    from workflows.models import StepRun, WorkflowInstance

    version = wl.version_for(f"proto-{name}", wl.chain_graph(length))
    per_step: list[float] = []
    ids = []
    for i in range(chains + 2):
        inst = executor.start_instance(version, {"n": i})
        first = StepRun.objects.get(instance=inst, node_id="s1").pk
        t = time.perf_counter()
        claim = executor.claim_step(first, "proto:1")
        steps = 0
        while claim is not None:
            outcome = executor.run_claimed(claim)
            claim = finish(claim, outcome)
            steps += 1
        if i >= 2:
            per_step.append((time.perf_counter() - t) / steps)
            ids.append(inst.pk)
    statuses = set(WorkflowInstance.objects.filter(pk__in=ids).values_list("status", flat=True))
    if statuses != {"completed"}:
        raise RuntimeError(f"{name}: instances ended {statuses}")
    return {"median_ms": round(statistics.median(per_step) * 1000, 3),
            "mean_ms": round(statistics.mean(per_step) * 1000, 3)}


def _variant(name: str) -> Callable[[Any, Any], Any]:
    from workflows import executor

    if name == "orm":
        return lambda c, o: executor.finish_step(c, o, allow_inline=True)
    return FastPath(optimistic=name == "raw1").finish


def _child(name: str, first_steps: list[int], start_at: float, out: Any) -> None:
    """One process of the parallel run: waits for the common start, then runs its chains."""
    from workflows import executor

    # workflows/live.py opens a fresh Redis connection in a forked child by itself (it checks the pid).
    finish = _variant(name)
    while time.time() < start_at:
        time.sleep(0.001)
    steps = 0
    for step_id in first_steps:
        claim = executor.claim_step(step_id, f"proto:{os.getpid()}")
        while claim is not None:
            claim = finish(claim, executor.run_claimed(claim))
            steps += 1
    out.put((steps, time.time()))


def parallel_variant(name: str, procs: int, chains: int, length: int) -> float:
    """steps/s of `procs` processes each running its share of `chains` (started beforehand, in one
    transaction, so starting is not measured), as `run_step` would with inline continuation."""
    import multiprocessing

    from django.db import connections, transaction

    from bench import workloads as wl
    from workflows import executor
    from workflows.models import StepRun

    version = wl.version_for(f"par-{name}-{time.time_ns()}", wl.chain_graph(length))
    with transaction.atomic():
        ids = [executor.start_instance(version, {"n": i}).pk for i in range(chains)]
    firsts = list(StepRun.objects.filter(instance_id__in=ids, node_id="s1").order_by("id")
                  .values_list("pk", flat=True))
    connections.close_all()  # the children must not share this process's connection
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start_at = time.time() + 0.5
    children = [ctx.Process(target=_child, args=(name, firsts[i::procs], start_at, out)) for i in range(procs)]
    for child in children:
        child.start()
    results = [out.get(timeout=600) for _ in children]
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"{name}: a child exited with {child.exitcode}")
    steps = sum(r[0] for r in results)
    return steps / (max(r[1] for r in results) - start_at)


def same_rows(ids_a: list[int], ids_b: list[int]) -> None:
    """The prototype must write what the ORM path writes: compare event types and step rows."""
    from workflows.models import Checkpoint, Event, StepRun, WorkflowInstance

    volatile = {"duration_ms", "worker", "trace_id", "definition"}

    def shape(ids: list[int]) -> list[Any]:
        return [
            ([(e.seq, e.type, e.node_id, e.step.node_id if e.step else None,
               {k: v for k, v in e.payload.items() if k not in volatile})
              for e in Event.objects.filter(instance_id=i).select_related("step").order_by("seq")],
             list(StepRun.objects.filter(instance_id=i).order_by("id")
                  .values_list("node_id", "node_type", "visit", "attempt", "status", "queue", "output", "input",
                               "error", "usage", "degraded")),
             list(Checkpoint.objects.filter(instance_id=i).order_by("seq").values_list("seq", "state")),
             list(WorkflowInstance.objects.filter(pk=i).values_list("status", "state", "loop_count", "open_steps",
                                                                   "event_seq")))
            for i in ids
        ]

    for part, (a, b) in enumerate(zip(shape(ids_a)[0], shape(ids_b)[0], strict=True)):
        for row_a, row_b in zip(a, b, strict=False):
            if row_a != row_b:
                raise AssertionError(f"the prototype's rows differ from the ORM path's (part {part}):\n"
                                     f"  orm:       {row_a}\n  prototype: {row_b}")
        if len(a) != len(b):
            raise AssertionError(f"the prototype wrote {len(b)} rows in part {part}, the ORM path {len(a)}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fastpath_prototype", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternate the variants this many times")
    parser.add_argument("--procs", type=int, default=2,
                        help="also measure steps/s with this many processes in parallel (0: skip)")
    parser.add_argument("--parallel-chains", type=int, default=200, help="chains for the parallel measure")
    parser.add_argument("--pg-options", type=json.loads, default=None,
                        help='extra OPTIONS for the PostgreSQL connection, JSON, e.g. '
                             '\'{"server_side_binding": true, "prepare_threshold": 5}\'')
    args = parser.parse_args(argv)
    if not (os.environ.get("DATABASE_URL") or "").startswith(("postgres://", "postgresql://", "pgsql://")):
        raise SystemExit("the prototype is PostgreSQL SQL: set DATABASE_URL=postgres://...")
    tmpdir, db = make_database(os.environ.get("DATABASE_URL"))
    cluster = Cluster(env={}, logdir=Path(tmpdir))
    try:
        redis_url = os.environ.get("BENCH_REDIS_URL") or cluster.start_redis()
        env = {**os.environ, "DATABASE_URL": db.url, "REDIS_URL": redis_url, "LOG_LEVEL": "WARNING",
               "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
        db.migrate(env)
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        if args.pg_options:
            from django.db import connection

            # Before the first query: the connection reads its OPTIONS when it opens.
            connection.settings_dict["OPTIONS"].update(args.pg_options)
            note(f"connection OPTIONS {connection.settings_dict['OPTIONS']}")
        from workflows import executor

        check_equivalence(args.length)
        if args.procs:
            rates: dict[str, list[float]] = {name: [] for name in ("orm", "raw2", "raw1")}
            for _ in range(args.rounds):
                for name in rates:
                    rates[name].append(round(parallel_variant(name, args.procs, args.parallel_chains,
                                                              args.length), 1))
            for name, values in rates.items():
                print(json.dumps({"variant": name, "procs": args.procs, "steps_per_s_median":
                                  statistics.median(values), "rounds": values}))
        raw2, raw1 = FastPath(optimistic=False), FastPath(optimistic=True)
        variants: dict[str, Callable[[Any, Any], Any]] = {
            "orm": lambda c, o: executor.finish_step(c, o, allow_inline=True),
            "raw2": raw2.finish,
            "raw1": raw1.finish,
        }
        results: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):  # alternate, so a noisy neighbour hurts every variant alike
            for name, finish in variants.items():
                results[name].append(run_variant(name, finish, args.chains, args.length)["median_ms"])
        for name, values in results.items():
            print(json.dumps({"variant": name, "per_step_ms_median": round(statistics.median(values), 3),
                              "rounds": values}))
        for name, fp in (("raw2", raw2), ("raw1", raw1)):
            note(f"{name}: {fp.fast} fast commits ({fp.sql_s / max(1, fp.fast) * 1000:.3f} ms each in psycopg: "
                 f"round trips and server), {fp.fallbacks} fallbacks to the ORM path")
    finally:
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        cluster.stop()
        db.drop()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


def check_equivalence(length: int) -> None:
    """Run one chain per variant and compare the rows they wrote."""
    from bench import workloads as wl
    from workflows import executor
    from workflows.models import StepRun

    ids: dict[str, list[int]] = {}
    for name, finish in (("orm", lambda c, o: executor.finish_step(c, o, allow_inline=True)),
                         ("raw2", FastPath(False).finish), ("raw1", FastPath(True).finish)):
        version = wl.version_for(f"equiv-{name}", wl.chain_graph(length))
        inst = executor.start_instance(version, {"n": 0})
        claim = executor.claim_step(StepRun.objects.get(instance=inst, node_id="s1").pk, "proto:1")
        while claim is not None:
            claim = finish(claim, executor.run_claimed(claim))
        ids[name] = [inst.pk]
    same_rows(ids["orm"], ids["raw2"])
    same_rows(ids["orm"], ids["raw1"])
    note("the raw SQL variants wrote the same events and step rows as the ORM path")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
