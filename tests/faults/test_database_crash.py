"""The database host fails mid-run, on a private cluster (tests/faults/pgcluster.py), while a client
starts instances and workers run them:

- PostgreSQL crashes: `pg_ctl stop -m immediate`, started again a few seconds later (crash recovery
  from the WAL);
- its disk fills up: the data directory's (a small tmpfs) free space taken by a file for a few
  seconds, so writes that need new space fail with "No space left on device", then given back.

The workers, the `ai` consumer, the scheduler, the web process (daphne: its pages and the live view's
socket) and the client reconnect or retry by themselves; every instance the client was told about, or
retried under its key, finishes; nothing committed is lost or committed twice;
steps in flight are retried (their commit failed, or their lease expired) and their side effects,
keyed, land once.

PostgreSQL only, and needs the server binaries (initdb, pg_ctl) on this machine; the disk-full
episode also needs root (it mounts a tmpfs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from tests.conftest import ROOT
from tests.faults.conftest import full_logs, record
from tests.faults.live_watch import LiveWatch
from tests.faults.pgcluster import PrivateCluster, bin_dir
from tests.support.web import DaphneServer

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

COUNT = 60
INTERVAL_S = 0.25  # the client starts instances over ~15 s: the crash falls in the middle
STEP_S = 0.3
DOWN_S = 4.0
SMALL_DISK_MB = 160  # the data directory (initdb + migrations: ~60 MB) on a tmpfs this size
FULL_S = 5.0
OUTCOMES = ("step_succeeded", "step_failed", "compensation_succeeded")
OPERATOR, PASSWORD = "operator", "crash-test-password-1"


@pytest.fixture
def cluster(request: Any) -> Any:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL=postgres://...)")
    if bin_dir() is None:
        pytest.skip("needs the PostgreSQL server binaries (initdb, pg_ctl)")
    small_disk_mb = getattr(request, "param", None)
    if small_disk_mb and os.geteuid() != 0:
        pytest.skip("the disk-full episode mounts a small tmpfs: needs root")
    server = PrivateCluster(small_disk_mb=small_disk_mb)
    try:
        server.init()
        server.start()
        server.create_database("steadyflow")
        yield server
    finally:
        server.close()


def query(cluster: PrivateCluster, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(cluster.url("steadyflow"), connect_timeout=3) as conn:
        return list(conn.execute(sql, params).fetchall())  # type: ignore[arg-type]


def completed(cluster: PrivateCluster) -> int:
    try:
        return int(query(cluster, "SELECT count(*) FROM workflows_workflowinstance WHERE status = 'completed'")[0][0])
    except Exception:  # noqa: BLE001 - the server is away
        return -1


def run_episode(cluster: PrivateCluster, processes: Any, sink: Any, worker_env: dict[str, str],
                fault: Callable[[], None], tmp_path: Any) -> dict[str, Any]:
    """Start the workload and the web process, run `fault` (it returns when the fault is over) once a
    quarter of the instances completed, wait for every instance to settle, check, and return the figures."""
    env = {**worker_env, "DATABASE_URL": cluster.url("steadyflow")}
    for command in (["migrate", "--noinput"],
                    ["createsuperuser", "--noinput", "--username", OPERATOR, "--email", "op@example.com"]):
        done = subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, capture_output=True, text=True,
                              env={**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    web = DaphneServer(env, tmp_path)
    web.start()
    try:
        return episode(cluster, processes, sink, env, fault, web)
    finally:
        web.stop()


def episode(cluster: PrivateCluster, processes: Any, sink: Any, env: dict[str, str], fault: Callable[[], None],
            web: DaphneServer) -> dict[str, Any]:
    browser = web.login(OPERATOR, PASSWORD)
    # The dashboard page's socket, open throughout: its change notices must carry on after the fault.
    watch = LiveWatch(web.url, dict(browser.cookies))
    try:
        def page_answers() -> bool:
            try:
                return browser.get("/instances/", timeout=2).status_code == 200
            except Exception:  # noqa: BLE001 - the page is failing while the database is away
                return False

        assert page_answers()
        # While the database is away a page says so (503, dashboard/urls.py handler500), never a bare 500.
        during: list[int] = []

        def fault_with_a_page_open() -> None:
            stop = threading.Event()

            def look() -> None:
                while not stop.wait(0.5):
                    try:
                        during.append(browser.get("/instances/", timeout=2).status_code)
                    except Exception:  # noqa: BLE001 - no answer within 2 s
                        during.append(0)

            looker = threading.Thread(target=look, daemon=True)
            looker.start()
            try:
                fault()
            finally:
                stop.set()
                looker.join()

        figures = workload(cluster, processes, sink, env, fault_with_a_page_open, page_answers)
        assert during and 500 not in during, during
        back_at = figures.pop("back_at")
        assert web.proc.poll() is None, "the web process died instead of reconnecting"
        # Pages answer again from the same process, and the dashboard's figures show every instance.
        page = browser.get("/instances/")
        assert page.status_code == 200, page.status_code
        stats = browser.get("/api/dashboard").json()
        assert "completed" in str(stats), stats
        # The live view carried on: change notices after the fault (on the same socket, or after the page's
        # reconnection if the server closed it).
        notices = watch.after(back_at, "changes")
        assert notices, f"no live change notice after the fault ({len(watch.messages)} before it)"
        figures.update(pages_during_fault=dict(Counter(during)), web_answered_after_s=figures.pop("web_back_s"),
                       live_notices_after=len(notices), live_reconnects=len(watch.connects) - 1)
        return figures
    finally:
        watch.stop()


def workload(cluster: PrivateCluster, processes: Any, sink: Any, env: dict[str, str],
             fault: Callable[[], None], page_answers: Callable[[], bool]) -> dict[str, Any]:
    for _ in range(2):
        processes.worker("default", env=env)
    processes.worker("ai", env=env)
    processes.scheduler(env=env)
    client_env = {**env, "CRASH_COUNT": str(COUNT), "CRASH_INTERVAL_S": str(INTERVAL_S),
                  "CRASH_SINK": sink.url(), "CRASH_STEP_S": str(STEP_S)}
    client = processes.start("shell", "-c", "from tests.faults.crash_workload import main; main()", env=client_env)

    began = time.monotonic()
    while completed(cluster) < COUNT // 4:
        assert time.monotonic() - began < 180, f"no progress before the crash:\n{full_logs(processes)[-4000:]}"
        assert client.poll() in (None, 0), full_logs(processes)[-4000:]
        time.sleep(0.1)
    done_before = completed(cluster)
    crashed_at = time.monotonic()
    fault()
    back_at = time.monotonic()
    web_back_s = None
    first_after = None
    # Every instance settles: the client has started them all and each completed.
    settled_at = None
    while time.monotonic() - back_at < 240:
        done = completed(cluster)
        if first_after is None and done > done_before:
            first_after = time.monotonic() - back_at
        if web_back_s is None and page_answers():
            web_back_s = round(time.monotonic() - back_at, 1)
        if client.poll() == 0 and done == COUNT:
            settled_at = time.monotonic()
            break
        assert client.poll() in (None, 0), f"the client died:\n{full_logs(processes)[-4000:]}"
        time.sleep(0.2)
    logs = full_logs(processes)
    assert settled_at is not None, (f"{completed(cluster)} of {COUNT} completed 240 s after the restart:\n"
                                    f"{logs[-6000:]}\n--- server log\n{cluster.server_log()[-3000:]}")
    for proc in processes.procs:
        if proc is not client:
            assert proc.poll() is None, "a worker or the scheduler died instead of reconnecting"

    # None lost: every start the client was told about exists, once per key.
    client_out = logs
    told = {int(line.split()[1]) for line in client_out.splitlines() if line.startswith("started ")}
    assert told == set(range(COUNT))
    keys = query(cluster, "SELECT idempotency_key, count(*) FROM workflows_workflowinstance GROUP BY 1")
    assert len(keys) == COUNT and all(n == 1 for _, n in keys), "an instance was started twice"
    statuses = dict(query(cluster, "SELECT status, count(*) FROM workflows_workflowinstance GROUP BY 1"))
    assert statuses == {"completed": COUNT}, statuses
    # Nothing committed twice: one StepRun per (instance, node, visit), one outcome per finished step.
    dup_steps = query(cluster, "SELECT instance_id, node_id, visit FROM workflows_steprun "
                               "GROUP BY 1, 2, 3 HAVING count(*) > 1")
    outcomes = Counter(dict(query(cluster, "SELECT step_id, count(*) FROM workflows_event WHERE type = ANY(%s) "
                                           "GROUP BY 1", (list(OUTCOMES),))))
    steps = query(cluster, "SELECT id, status, attempt, idempotency_key, node_type FROM workflows_steprun")
    work = [s for s in steps if s[4] == "python"]
    assert not dup_steps
    assert all(outcomes.get(s[0], 0) == 1 for s in steps if s[1] == "succeeded")
    assert all(n <= 1 for n in outcomes.values())
    gaps = query(cluster, "SELECT i.id FROM workflows_workflowinstance i WHERE i.event_seq <> "
                          "(SELECT count(*) FROM workflows_event e WHERE e.instance_id = i.id)")
    assert not gaps, f"event sequences with gaps: {gaps}"
    # Side effects once per key; each delivery one of that step's attempts.
    deliveries = sink.delivery_counts()
    attempts = {s[3]: s[2] for s in work}
    assert set(deliveries) == set(attempts), "a step's effect never reached the sink, or a stranger's did"
    assert all(sink.effects[key] == 1 for key in deliveries)
    assert all(deliveries[key] <= attempts[key] for key in deliveries)
    retried = sum(1 for s in work if s[2] > 1)
    # Logged once per episode and process, not per step or tick (before: ~60 job tracebacks a run; then a
    # job traceback per step in flight whose commit gave up: 4-16 a run, more under load). Now a step given
    # up to its lease ends its job quietly, one line a minute per process saying so.
    assert logs.count("Traceback") == 0, "\n".join(line[:600] for line in logs.splitlines() if "Traceback" in line)
    assert logs.count("gave up committing its outcome after") <= 3  # 2 workers and the ai consumer
    assert logs.count("committing its outcome failed (") <= 6 and logs.count("its tick failed (") <= 3
    return dict(instances=COUNT, finished=statuses.get("completed", 0),
                lost=COUNT - len(keys), duplicate_instances=sum(n - 1 for _, n in keys),
                duplicate_steps=len(dup_steps), duplicate_outcomes=sum(1 for n in outcomes.values() if n > 1),
                completed_before_fault=done_before, fault_s=round(back_at - crashed_at, 1),
                steps_retried=retried, effects=len(deliveries),
                redeliveries=sum(deliveries.values()) - len(deliveries),
                client_retries=logs.count("retrying start"),
                # What the operator reads: one warning per process and episode, and its end.
                commit_failure_warnings=logs.count("committing its outcome failed ("),
                tick_failure_warnings=logs.count("its tick failed ("),
                writes_back_lines=logs.count("the database accepts writes again"),
                job_tracebacks=logs.count("Traceback"), outcomes_given_up_lines=logs.count("gave up committing"),
                first_completion_after_s=None if first_after is None else round(first_after, 1),
                settle_s=round(settled_at - back_at, 1), load=round(os.getloadavg()[0], 1), logs=logs,
                back_at=back_at, web_back_s=web_back_s)


def test_postgres_immediate_stop_and_restart_under_load(cluster, processes, sink, worker_env, tmp_path):
    def crash() -> None:
        cluster.crash()
        time.sleep(DOWN_S)
        cluster.start()

    figures = run_episode(cluster, processes, sink, worker_env, crash, tmp_path)
    assert "database system was not properly shut down; automatic recovery in progress" in cluster.server_log()
    assert figures["pages_during_fault"].get(503), f"no page said the database was away: {figures}"
    figures.pop("logs")
    record("PostgreSQL stopped -m immediate and restarted", **figures)


@pytest.mark.parametrize("cluster", [SMALL_DISK_MB], indirect=True, ids=["small-disk"])
def test_disk_full_for_a_few_seconds_under_load(cluster, processes, sink, worker_env, tmp_path):
    """The database refuses writes that need space (ENOSPC) for FULL_S; writes then succeed again."""
    taken: list[int] = []

    def fill() -> None:
        taken.append(cluster.fill_disk())
        time.sleep(FULL_S)
        cluster.free_disk()

    figures = run_episode(cluster, processes, sink, worker_env, fill, tmp_path)
    logs = figures.pop("logs")
    server = cluster.server_log()
    refused = server.count("No space left on device")
    assert refused > 0, "the database was to refuse writes while its disk was full"
    record("database disk full, then space back", **figures, filled_mb=round(taken[0] / 2**20),
           server_enospc_errors=refused, process_log_lines_naming_it=logs.count("No space left on device"))
