"""Health checks, shared by `manage.py health` (container health checks, operators) and `/healthz`.

A check returns None when it passes, else one line naming the problem. A *role* is the set of checks a
container of that kind needs to pass to be useful (docs/production-and-scaling.md):

- web: the database answers, Redis answers, every migration is applied;
- worker: the database and Redis answer, and a worker of this host (RQ's registry, with its pid alive)
  serves each of the queues asked for;
- scheduler: the database and Redis answer, and this host's scheduler wrote its heartbeat recently;
- all (operators): the above for the whole deployment (any host) plus the queues' backlog age and the
  instances without progress (`find_stuck` in workflows/scheduler/stuck.py).

Nothing here writes, except `scheduler_beat`, which the scheduler calls each tick (and RQ itself,
dropping the names of expired workers from its registry as it reads it). Messages never carry
a password: a Redis URL is shown without its credentials.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import DatabaseError, connection
from redis.exceptions import RedisError

from workflows import clock
from workflows.engine.priorities import queue_names

ROLES: dict[str, tuple[str, ...]] = {
    "web": ("database", "redis", "migrations"),
    "worker": ("database", "redis", "worker"),
    "scheduler": ("database", "redis", "scheduler"),
    "all": ("database", "redis", "migrations", "workers", "scheduler", "queues", "stuck", "clock"),
}
CHECK_NAMES = ("database", "redis", "migrations", "worker", "workers", "scheduler", "queues", "stuck", "clock")
QUEUES = ("ai", "io", "default")
SCHEDULER_KEY = "steadyflow:scheduler:heartbeat:"  # + host name; value {"at": epoch s, "pid": n}
NEEDS_DATABASE = {"migrations", "stuck"}
NEEDS_REDIS = {"worker", "workers", "scheduler", "queues", "clock"}


def redacted_url(url: str) -> str:
    """A URL without its password (Redis URLs may carry one)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def scheduler_stale_after_s() -> float:
    """A scheduler heartbeat older than this means the loop stopped (a slow tick stays well within it)."""
    return max(60.0, 20 * float(settings.STEADYFLOW["SCHEDULER_INTERVAL_S"]))


def redis_client() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3, socket_timeout=3)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def scheduler_beat(client: Any, now: float | None = None) -> None:
    """The scheduler's heartbeat: one key per host, expiring when the loop stops writing it."""
    ttl = max(1, int(scheduler_stale_after_s()))
    client.set(SCHEDULER_KEY + socket.gethostname(),
               json.dumps({"at": clock.timestamp() if now is None else now, "pid": os.getpid()}), ex=ttl)


@dataclass
class Report:
    role: str
    problems: dict[str, str] = field(default_factory=dict)  # check name -> what is wrong
    passed: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # queues' backlog, workers, stuck instances

    @property
    def ok(self) -> bool:
        return not self.problems


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"unreachable: {exc}".strip()
    return None


def check_redis() -> str | None:
    try:
        client = redis_client()
        try:
            client.ping()
        finally:
            client.close()
    except (RedisError, OSError) as exc:
        return f"unreachable at {redacted_url(settings.REDIS_URL)}: {exc}"
    return None


def check_migrations() -> str | None:
    """Every migration on disk is applied (a few ms: the migration modules are imported once)."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = [f"{m.app_label}.{m.name}" for m, _ in plan]
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return f"{len(names)} not applied ({', '.join(names[:5])}{more}): run manage.py migrate"
    return None


def live_workers(client: Any, queue: str) -> list[dict[str, Any]]:
    """RQ's registered workers of a queue whose registration has not expired; on this host, whose pid
    is still there too (a worker killed outright leaves its registration until it expires)."""
    from rq import Queue, Worker

    here = socket.gethostname()
    found = []
    for worker in Worker.all(queue=Queue(queue, connection=client)):
        local = worker.hostname == here
        if local and not pid_alive(worker.pid):
            continue
        found.append({"name": worker.name, "host": worker.hostname, "pid": worker.pid, "local": local})
    return found


def check_worker(client: Any, queues: Iterable[str], report: Report) -> str | None:
    """This host serves each queue (a container's own worker)."""
    wanted = list(queues)
    missing = []
    for queue in wanted:
        mine = [w for w in live_workers(client, queue) if w["local"]]
        report.details.setdefault("workers", {})[queue] = len(mine)
        if not mine:
            missing.append(queue)
    if missing:
        return f"no live worker on {socket.gethostname()} for queue(s) {', '.join(missing)}"
    return None


def check_workers(client: Any, report: Report) -> str | None:
    """Every queue is served by at least one live worker, anywhere."""
    counts = {queue: len(live_workers(client, queue)) for queue in QUEUES}
    report.details["workers"] = counts
    missing = [queue for queue, n in counts.items() if n == 0]
    return f"no live worker for queue(s) {', '.join(missing)}" if missing else None


def check_scheduler(client: Any, *, local: bool, now: float) -> str | None:
    stale = scheduler_stale_after_s()
    pattern = SCHEDULER_KEY + (socket.gethostname() if local else "*")
    beats = []
    for key in client.scan_iter(match=pattern, count=100):
        raw = client.get(key)
        if raw is None:
            continue
        beat = json.loads(raw)
        if local and not pid_alive(beat.get("pid")):
            continue
        beats.append(now - float(beat["at"]))
    where = f" on {socket.gethostname()}" if local else ""
    if not beats:
        return f"no scheduler heartbeat{where} in the last {stale:g} s"
    if min(beats) > stale:
        return f"the scheduler's last heartbeat{where} is {min(beats):.0f} s old (more than {stale:g} s)"
    return None


def check_queues(client: Any, threshold_s: float, now: float, report: Report) -> str | None:
    """Backlog and the age of each queue's oldest job; a job waiting longer than threshold_s fails."""
    from rq import Queue

    backlog: dict[str, dict[str, Any]] = {}
    late = []
    for name in [queue_name for kind in QUEUES for queue_name in queue_names(kind)]:  # every priority's
        queue = Queue(name, connection=client)
        oldest_s = None
        ids = queue.get_job_ids(0, 1)  # offset, length: the oldest job
        job = queue.fetch_job(ids[0]) if ids else None
        if job is not None and job.enqueued_at is not None:
            oldest_s = round(now - job.enqueued_at.timestamp(), 1)
            if oldest_s > threshold_s:
                late.append(f"{name} ({oldest_s:g} s)")
        backlog[name] = {"backlog": queue.count, "oldest_s": oldest_s}
    report.details["queues"] = backlog
    if late:
        return f"jobs waiting longer than {threshold_s:g} s: {', '.join(late)}"
    return None


def run_checks(role: str, *, queues: Iterable[str] = (), skip: Iterable[str] = (),
               threshold_s: float | None = None) -> Report:
    """Run the role's checks (less `skip`); a check that needs an unreachable database or Redis is
    reported as not checked rather than run into the same error."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    threshold = float(settings.STEADYFLOW["STUCK_AFTER_S"]) if threshold_s is None else threshold_s
    names = [n for n in ROLES[role] if n not in set(skip)]
    report = Report(role=role)
    now = clock.timestamp()  # the database's clock: heartbeats from other hosts are stamped with it
    clients: list[Any] = []

    def redis_conn() -> Any:  # one connection for the checks that need one, made when first needed
        if not clients:
            clients.append(redis_client())
        return clients[0]

    checks: dict[str, Callable[[], str | None]] = {
        "database": check_database,
        "redis": check_redis,
        "migrations": check_migrations,
        "worker": lambda: check_worker(redis_conn(), queues or QUEUES, report),
        "workers": lambda: check_workers(redis_conn(), report),
        "scheduler": lambda: check_scheduler(redis_conn(), local=role == "scheduler", now=now),
        "queues": lambda: check_queues(redis_conn(), threshold, now, report),
        "stuck": lambda: stuck_problem(threshold, report),
        "clock": lambda: check_clocks(redis_conn(), report),
    }

    def run(name: str) -> None:
        if name in NEEDS_DATABASE and "database" in report.problems:
            report.problems[name] = "not checked: the database is unreachable"
            return
        if name in NEEDS_REDIS and "redis" in report.problems:
            report.problems[name] = "not checked: Redis is unreachable"
            return
        try:
            problem = checks[name]()
        except (RedisError, OSError, DatabaseError) as exc:  # went away between the checks
            problem = f"failed: {type(exc).__name__}: {exc}"
        if problem:
            report.problems[name] = problem
        else:
            report.passed.append(name)

    try:
        for name in names:
            run(name)
    finally:
        for client in clients:
            client.close()
    report.details["threshold_s"] = threshold
    return report


def check_clocks(client: Any, report: Report) -> str | None:
    """Each worker's, ai consumer's and scheduler's offset to the database's clock, as each last
    measured it (workflows/clock.py). A process beyond CLOCK_SKEW_WARN_S still works correctly (its
    timestamps are the database's), but its host's time sync is broken: named here."""
    readings = []
    for key in client.scan_iter(match=clock.CLOCK_KEY + "*", count=100):
        raw = client.get(key)
        if raw is not None:
            readings.append(json.loads(raw))
    readings.sort(key=lambda r: (r.get("host", ""), r.get("role", ""), r.get("pid", 0)))
    report.details["clocks"] = readings
    warn_s = float(settings.STEADYFLOW.get("CLOCK_SKEW_WARN_S", 5.0))
    skewed = [r for r in readings if abs(float(r.get("offset_s", 0))) > warn_s]
    if skewed:
        named = ", ".join(f"{r.get('role')} {r.get('host')}:{r.get('pid')} ({float(r['offset_s']):+.1f} s)"
                          for r in skewed[:5])
        return (f"{len(skewed)} process(es) whose host clock is more than {warn_s:g} s off the database's: "
                f"{named}")
    return None


def stuck_problem(threshold_s: float, report: Report) -> str | None:
    from workflows.scheduler.stuck import find_stuck

    stuck = find_stuck(threshold_s)
    report.details["stuck"] = stuck
    if stuck:
        return f"{len(stuck)} stuck instance(s): no progress for more than {threshold_s:g} s"
    return None
