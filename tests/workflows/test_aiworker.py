"""The `ai` queue's asyncio consumer (`manage.py run_worker ai`), end to end: real worker processes,
real Redis, the real database, and a local OpenAI-compatible server (tests/support/llm_server.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import django_rq
import pytest
from rq import Queue, Worker
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry

from tests.conftest import chain, wait_for, wait_for_status
from tests.support.llm_server import LLMServerProcess, LLMTestServer
from workflows import runtime
from workflows.engine.nodes import NodeResult
from workflows.models import StepRun, WorkflowInstance
from workflows.workers import dispatch

pytestmark = pytest.mark.django_db(transaction=True)

AI_NAME = "ai-under-test"
# Breakers belong to their own tests: keep them closed here whatever a test's error rate.
QUIET_BREAKERS = {"STEADYFLOW_BREAKER_MIN_CALLS": "100000"}


def llm(node_id: str = "ask", **config: Any) -> dict[str, Any]:
    extra = {k: config.pop(k) for k in ("retry", "timeout_s", "queue") if k in config}
    return {"id": node_id, "type": "llm", "config": {"provider": "openai", "model": "test-model",
                                                      "prompt": "Say ok", **config}, **extra}


def scripted(node_id: str = "ask", *, text: str = "hello", delay_s: float = 0.0,
             **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"text": text}
    if delay_s:
        entry["delay_s"] = delay_s
    return {"id": node_id, "type": "llm",
            "config": {"provider": "scripted", "prompt": "x", "script": [entry]}, **extra}


def start_ai(processes: Any, server: LLMTestServer | LLMServerProcess | None = None, *args: str,
             name: str = AI_NAME, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`manage.py run_worker ai --name NAME`, pointed at `server` when given."""
    full_env = dict(QUIET_BREAKERS)
    if server is not None:
        full_env["STEADYFLOW_LLM_BASE_URL"] = server.url
    full_env.update(env or {})
    return processes.start("run_worker", "ai", "--name", name, *args, env=full_env)


def rq_state(conn: Any, queue: str = "ai") -> dict[str, int]:
    q = Queue(queue, connection=conn)
    return {
        "queued": q.count,
        "started": StartedJobRegistry(queue, connection=conn).get_job_count(cleanup=False),
        "intermediate": conn.llen(q.intermediate_queue_key),
        "failed": FailedJobRegistry(queue, connection=conn).get_job_count(cleanup=False),
    }


def assert_rq_clean(conn: Any, failed: int = 0) -> None:
    """Nothing queued, nothing left executing, nothing stuck in the intermediate list."""
    clean = {"queued": 0, "started": 0, "intermediate": 0, "failed": failed}
    # The job's end is recorded in Redis just after its step commits: allow it a moment.
    wait_for(lambda: rq_state(conn) == clean, timeout=10, message=f"RQ registries {clean}")


def worker_hash(conn: Any, name: str = AI_NAME) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in conn.hgetall(f"rq:worker:{name}").items()}


def listening_queues(conn: Any) -> set[str]:
    return {name for worker in Worker.all(connection=conn) for name in worker.queue_names()}


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def wait_all(instances: list[WorkflowInstance], status: str, timeout: float) -> None:
    ids = [i.pk for i in instances]

    def done() -> bool:
        return WorkflowInstance.objects.filter(pk__in=ids, status=status).count() == len(ids)

    try:
        wait_for(done, timeout=timeout, interval=0.1, message=f"{len(ids)} instances {status}")
    except AssertionError:
        counts = {row["status"]: 0 for row in WorkflowInstance.objects.filter(pk__in=ids).values("status")}
        for row in WorkflowInstance.objects.filter(pk__in=ids).values("status"):
            counts[row["status"]] += 1
        raise AssertionError(f"expected all {len(ids)} {status}, got {counts}") from None


def running_steps(instances: list[WorkflowInstance]) -> int:
    return StepRun.objects.filter(instance__in=instances, status="running").count()


def rq_info_executing(queue: str = "ai") -> int:
    """What `rq info` prints as the queue's executing count."""
    from django.conf import settings

    command = [sys.executable, "-m", "rq.cli", "info", "--url", settings.REDIS_URL, "--raw", "--only-queues",
               queue]
    out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout
    match = re.search(rf"queue {queue} \d+, (\d+) executing", out)
    assert match, out
    return int(match.group(1))


# --- Many calls in flight --------------------------------------------------------------------------

def test_300_llm_calls_in_flight_in_one_consumer(processes, redis_conn, make_version):
    """300 instances start -> llm -> end against a server answering after 2 s: one consumer process
    keeps at least 200 calls in flight at once, with a handful of threads, and RQ shows them."""
    version = make_version(chain(llm()))
    with LLMTestServer(delay=2.0) as server:
        instances = [runtime.start_instance(version, {"n": i}) for i in range(300)]
        assert Queue("ai", connection=redis_conn).count == 300
        processes.worker("default")
        processes.worker("io")
        # Let them finish starting first: on two cores their start-up would compete with the ramp.
        wait_for(lambda: listening_queues(redis_conn) >= {"default", "io"}, timeout=30,
                 message="the default and io workers")
        ai = start_ai(processes, server)

        started = StartedJobRegistry("ai", connection=redis_conn)
        # A moment when the server has 200 requests in flight and RQ counts them as executing.
        wait_for(lambda: server.in_flight >= 200 and started.get_job_count(cleanup=False) >= 200,
                 timeout=25, interval=0.01, message="200 calls in flight and executing in RQ")
        threads = int(proc_status(ai.pid)["Threads"])
        assert rq_info_executing() > 0
        assert worker_hash(redis_conn)["state"] == "busy"

        wait_all(instances, "completed", timeout=30)
        rss_kb = int(proc_status(ai.pid)["VmRSS"].split()[0])
        assert server.max_in_flight >= 200
        assert threads < 30, f"the consumer ran {threads} threads"
        assert len(server.requests) == 300
        assert StepRun.objects.filter(instance__in=instances, node_id="ask", status="succeeded",
                                      attempt=1, worker=AI_NAME).count() == 300
        assert_rq_clean(redis_conn)
        wait_for(lambda: worker_hash(redis_conn).get("successful_job_count") == "300", timeout=5,
                 message="the worker's RQ statistics")
        print(f"\nai consumer: max {server.max_in_flight} in flight, {threads} threads, "
              f"RSS {rss_kb // 1024} MB")


def test_scripted_calls_run_concurrently_and_commit(processes, redis_conn, make_version):
    version = make_version(chain(scripted(text="hello", delay_s=2.0), settings={"max_transitions": 5}))
    instances = [runtime.start_instance(version, {}) for _ in range(20)]
    start_ai(processes)
    wait_all(instances, "completed", timeout=30)
    runs = list(StepRun.objects.filter(instance__in=instances, node_id="ask"))
    assert {r.output["text"] for r in runs} == {"hello"}
    assert {r.worker for r in runs} == {AI_NAME}
    # Every call was in flight at the same time: the last one started before the first one ended.
    assert max(r.started_at for r in runs) < min(r.finished_at for r in runs)
    assert_rq_clean(redis_conn)


# --- Errors, retries, timeouts -------------------------------------------------------------------

def test_provider_errors_are_retried_per_policy_then_fail(processes, redis_conn, make_version):
    # The test server as its own process this time (python -m tests.support.llm_server).
    with LLMServerProcess() as server:
        server.configure(model="flaky", script=[500, 429])
        server.configure(model="down", status=500)
        retry = {"max_attempts": 3, "backoff_s": 0.1, "max_backoff_s": 0.2}
        flaky = runtime.start_instance(make_version(chain(llm(model="flaky", retry=retry))), {})
        down_node = llm(model="down", retry={**retry, "max_attempts": 2})
        down = runtime.start_instance(make_version(chain(down_node)), {})
        processes.scheduler(env=QUIET_BREAKERS)
        start_ai(processes, server)

        wait_for_status(flaky, "completed", timeout=30)
        wait_for_status(down, "failed", timeout=30)
        step = StepRun.objects.get(instance=flaky, node_id="ask")
        assert step.status == "succeeded" and step.attempt == 3
        assert [r["status"] for r in server.requests if r["model"] == "flaky"] == [500, 429, 200]

        step = StepRun.objects.get(instance=down, node_id="ask")
        assert step.status == "failed" and step.attempt == 2
        assert step.error["code"] == "provider_error"
        assert "HTTP 500" in step.error["message"]
        assert [r["status"] for r in server.requests if r["model"] == "down"] == [500, 500]
        assert down.error["node"] == "ask"
    # Step failures are the steps' business: every RQ job itself ended well.
    assert_rq_clean(redis_conn)


def test_node_timeout_becomes_step_timeout(processes, redis_conn, make_version):
    with LLMTestServer(delay=10.0) as server:
        slow_script = runtime.start_instance(
            make_version(chain(scripted(delay_s=10.0, timeout_s=0.5, retry={"max_attempts": 1}))), {})
        slow_server = runtime.start_instance(
            make_version(chain(llm(timeout_s=0.5, retry={"max_attempts": 1}))), {})
        start_ai(processes, server)
        for instance in (slow_script, slow_server):
            wait_for_status(instance, "failed", timeout=20)
            step = StepRun.objects.get(instance=instance, node_id="ask")
            assert step.status == "failed" and step.error["code"] == "timeout", step.error
        message = StepRun.objects.get(instance=slow_script, node_id="ask").error["message"]
        assert "exceeded its timeout of 0.5 s" in message
    assert_rq_clean(redis_conn)


def test_a_bad_job_fails_in_rq_and_the_consumer_carries_on(processes, redis_conn, make_version):
    queue = django_rq.get_queue("ai")
    bad_step = queue.enqueue(dispatch.JOB_FUNC, "not-a-step-id", result_ttl=0)
    foreign_ok = queue.enqueue("workflows.workers.dispatch.job_id_for", 7)
    foreign_bad = queue.enqueue("workflows.workers.dispatch.job_id_for")  # missing argument: TypeError
    ai = start_ai(processes)
    wait_for(lambda: FailedJobRegistry("ai", connection=redis_conn).get_job_count(cleanup=False) == 2,
             timeout=20, message="both bad jobs failed in RQ")
    instance = runtime.start_instance(make_version(chain(scripted(text="still here"))), {})
    wait_for_status(instance, "completed", timeout=20)
    assert ai.poll() is None
    failed = FailedJobRegistry("ai", connection=redis_conn)
    assert set(failed.get_job_ids()) == {bad_step.id, foreign_bad.id}
    bad_step.refresh()
    assert "ValueError" in (bad_step.latest_result().exc_string or "")
    assert foreign_ok.id in FinishedJobRegistry("ai", connection=redis_conn).get_job_ids()
    assert foreign_ok.return_value() == "step-7"
    assert_rq_clean(redis_conn, failed=2)


# --- At most once, and duplicates ---------------------------------------------------------------

def test_a_job_for_a_step_claimed_elsewhere_does_nothing(processes, redis_conn, make_version):
    with LLMTestServer() as server:
        instance = runtime.start_instance(make_version(chain(llm())), {})
        step = StepRun.objects.get(instance=instance, node_id="ask")
        other = runtime.claim_step(step.pk, "someone-else")
        assert other is not None
        start_ai(processes, server)
        wait_for(lambda: worker_hash(redis_conn).get("successful_job_count") == "1", timeout=20,
                 message="the job to be processed")
        step.refresh_from_db()
        assert (step.status, step.worker, step.lease_token, step.attempt) == ("running", "someone-else",
                                                                               other.token, 1)
        assert server.requests == []
        assert_rq_clean(redis_conn)

        # The other worker finishes; a late duplicate delivery of the same step then finds it done.
        runtime.finish_step(other, runtime.Outcome(result=NodeResult(output={"text": "by someone else"})))
        wait_for_status(instance, "completed")
        dispatch.enqueue_steps([(step.pk, "ai")])
        wait_for(lambda: worker_hash(redis_conn).get("successful_job_count") == "2", timeout=20,
                 message="the duplicate job to be processed")
        assert server.requests == []
        step.refresh_from_db()
        assert (step.status, step.worker, step.attempt) == ("succeeded", "someone-else", 1)
    assert_rq_clean(redis_conn)


# --- Leases and heartbeats ----------------------------------------------------------------------

def test_long_calls_keep_their_leases_and_rq_heartbeats(processes, redis_conn, make_version):
    """A call much longer than the step lease is not taken back by the reconciler, and RQ sees the
    job heartbeat while it runs."""
    env = {"STEADYFLOW_LEASE_S": "2", "STEADYFLOW_AI_MONITORING_INTERVAL_S": "1"}
    instance = runtime.start_instance(
        make_version(chain(scripted(delay_s=5.0, retry={"max_attempts": 1}))), {})
    processes.scheduler(env=env)
    start_ai(processes, env=env)
    step = StepRun.objects.get(instance=instance, node_id="ask")
    wait_for(lambda: StepRun.objects.filter(pk=step.pk, status="running").exists(), timeout=20,
             message="the step to start")
    step.refresh_from_db()
    first_lease = step.lease_until
    job_key = f"rq:job:{dispatch.job_id_for(step.pk)}"
    first_beat = redis_conn.hget(job_key, "last_heartbeat")
    wait_for(lambda: StepRun.objects.get(pk=step.pk).lease_until > first_lease, timeout=5,
             message="the lease to be extended")
    wait_for(lambda: redis_conn.hget(job_key, "last_heartbeat") != first_beat, timeout=5,
             message="an RQ heartbeat for the job")
    assert worker_hash(redis_conn)["state"] == "busy"

    wait_for_status(instance, "completed", timeout=20)
    step.refresh_from_db()
    assert (step.status, step.attempt) == ("succeeded", 1)
    assert not instance.events.filter(type="step_retrying").exists()
    assert_rq_clean(redis_conn)
    wait_for(lambda: worker_hash(redis_conn)["state"] == "idle", timeout=5, message="the worker idle again")


# --- Other kinds, bursts, chains ----------------------------------------------------------------

def test_a_synchronous_node_on_the_ai_queue_runs_in_the_consumer(processes, redis_conn, make_version):
    node = {"id": "work", "type": "python", "config": {"function": "noop"}, "queue": "ai"}
    instance = runtime.start_instance(make_version(chain(node)), {})
    start_ai(processes)
    wait_for_status(instance, "completed", timeout=20)
    assert StepRun.objects.get(instance=instance, node_id="work").worker == AI_NAME
    assert_rq_clean(redis_conn)


def test_burst_runs_chained_llm_steps_then_exits(processes, redis_conn, make_version):
    graph = chain(scripted("first", text="one", delay_s=0.3), scripted("second", text="two", delay_s=0.3))
    version = make_version(graph)
    instances = [runtime.start_instance(version, {}) for _ in range(5)]
    ai = start_ai(processes, None, "--burst")
    assert ai.wait(timeout=30) == 0
    wait_all(instances, "completed", timeout=1)
    assert StepRun.objects.filter(instance__in=instances, worker=AI_NAME).count() == 10
    assert_rq_clean(redis_conn)
    assert f"rq:worker:{AI_NAME}".encode() not in redis_conn.smembers("rq:workers")


# --- Shutdown ------------------------------------------------------------------------------------

def test_sigterm_finishes_the_calls_in_flight_and_leaves_the_rest_queued(processes, redis_conn, make_version):
    version = make_version(chain(scripted(delay_s=2.0)))
    instances = [runtime.start_instance(version, {}) for _ in range(20)]
    ai = start_ai(processes, None, "--max-in-flight", "10")
    wait_for(lambda: running_steps(instances) == 10, timeout=20, message="10 steps in flight")
    running = StepRun.objects.filter(instance__in=instances, status="running")
    in_flight = set(running.values_list("pk", flat=True))
    ai.send_signal(signal.SIGTERM)
    assert ai.wait(timeout=15) == 0

    # The steps in flight at the signal finished; the others wait, queued in the database and in RQ.
    asks = StepRun.objects.filter(instance__in=instances, node_id="ask")
    assert set(asks.filter(status="succeeded").values_list("pk", flat=True)) >= in_flight
    left = asks.exclude(status="succeeded")
    assert set(left.values_list("status", flat=True)) <= {"queued"}
    assert rq_state(redis_conn) == {"queued": left.count(), "started": 0, "intermediate": 0, "failed": 0}
    assert WorkflowInstance.objects.filter(pk__in=[i.pk for i in instances], status="completed").count() \
        == 20 - left.count()
    assert "shutdown_requested_date" in worker_hash(redis_conn)

    start_ai(processes, name="ai-second")
    wait_all(instances, "completed", timeout=30)
    assert_rq_clean(redis_conn)


def test_sigterm_past_the_grace_period_gives_the_steps_back(processes, redis_conn, make_version):
    with LLMTestServer(delay=60.0) as server:
        version = make_version(chain(llm(retry={"max_attempts": 1})))
        instances = [runtime.start_instance(version, {}) for _ in range(5)]
        ai = start_ai(processes, server, env={"STEADYFLOW_AI_SHUTDOWN_GRACE_S": "0.5"})
        server.wait_for_in_flight(5, timeout=20)
        ai.send_signal(signal.SIGTERM)
        assert ai.wait(timeout=15) == 0

        # Each step is queued again with its attempt given back, its job at the front of the queue.
        for step in StepRun.objects.filter(instance__in=instances, node_id="ask"):
            assert (step.status, step.attempt, step.lease_token) == ("queued", 0, ""), step
            assert step.instance.events.filter(type="step_queued", node_id="ask").count() == 2
        assert rq_state(redis_conn) == {"queued": 5, "started": 0, "intermediate": 0, "failed": 0}

        server.configure(delay=0.05)
        start_ai(processes, server, name="ai-second")
        wait_all(instances, "completed", timeout=30)
        assert StepRun.objects.filter(instance__in=instances, node_id="ask", attempt=1,
                                      worker="ai-second").count() == 5
        assert len(server.requests) == 10
    assert_rq_clean(redis_conn)


def test_a_killed_consumer_loses_nothing(processes, redis_conn, make_version):
    """SIGKILL mid-call: the reconciler takes the steps back when their leases expire, and another
    consumer runs them (the killed attempt counts, as for any worker that died)."""
    env = {"STEADYFLOW_LEASE_S": "2"}
    version = make_version(chain(scripted(delay_s=1.5, retry={"max_attempts": 2, "backoff_s": 0.1})))
    instances = [runtime.start_instance(version, {}) for _ in range(5)]
    processes.scheduler(env=env)
    ai = start_ai(processes, env=env)
    wait_for(lambda: running_steps(instances) == 5, timeout=20, message="5 steps in flight")
    ai.send_signal(signal.SIGKILL)
    ai.wait(timeout=10)
    start_ai(processes, name="ai-second", env=env)
    wait_all(instances, "completed", timeout=30)
    asks = StepRun.objects.filter(instance__in=instances, node_id="ask")
    assert {(s.status, s.attempt, s.worker) for s in asks} == {("succeeded", 2, "ai-second")}


def test_the_worker_record_is_removed_on_exit(processes, redis_conn):
    ai = start_ai(processes)
    wait_for(lambda: f"rq:worker:{AI_NAME}".encode() in redis_conn.smembers("rq:workers"), timeout=20,
             message="the worker to register")
    record = worker_hash(redis_conn)
    assert record["queues"] == "ai:high,ai,ai:low" and int(record["pid"]) == ai.pid  # every priority
    ai.send_signal(signal.SIGINT)
    assert ai.wait(timeout=15) == 0
    assert f"rq:worker:{AI_NAME}".encode() not in redis_conn.smembers("rq:workers")
    assert "death" in worker_hash(redis_conn)


def test_a_second_consumer_with_a_live_name_refuses_to_start(processes, redis_conn):
    start_ai(processes)
    wait_for(lambda: f"rq:worker:{AI_NAME}".encode() in redis_conn.smembers("rq:workers"), timeout=20,
             message="the first consumer to register")
    second = start_ai(processes)
    assert second.wait(timeout=20) != 0
    assert "the ai consumer cannot register with RQ" in processes.logs()
