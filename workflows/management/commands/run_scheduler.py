from __future__ import annotations

import logging
import signal
import time
from typing import Any

import django_rq
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import InterfaceError, OperationalError, close_old_connections

from workflows import clock
from workflows.checks import PROCESS_CHECKS
from workflows.database_outage import DatabaseOutage
from workflows.observability import metrics  # noqa: F401 - its gauge listens to the clock (clock.listeners)
from workflows.operators.health import scheduler_beat
from workflows.scheduler import reconciler
from workflows.triggers import tick as triggers
from workflows.workers.redis_outage import REDIS_ERRORS, Backoff, Outage, pause

log = logging.getLogger("steadyflow.scheduler")


def ping_queues() -> None:
    """One PING per distinct Redis the queues use; raises what redis-py raises when one is away."""
    seen: set[str] = set()
    for name, conf in settings.RQ_QUEUES.items():
        key = repr(sorted(conf.items()))
        if key not in seen:
            seen.add(key)
            django_rq.get_connection(name).ping()


class Command(BaseCommand):
    help = ("Run the scheduler/reconciler loop: timers, retries, lost jobs, expired leases, TTLs, cron "
            "schedules and notification retries.")
    requires_system_checks = PROCESS_CHECKS  # workflows/checks.py: not the URL and model checks

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="run one tick and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        interval = settings.STEADYFLOW["SCHEDULER_INTERVAL_S"]
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        outage = Outage(log, "scheduler")
        database = DatabaseOutage(log, "scheduler")
        clock.register("scheduler")  # its offset to the database's clock, logged at start when skewed
        log.info("scheduler started", extra={"tick_s": interval})
        backoff = Backoff()
        while not stopping:
            started = time.monotonic()
            try:
                # While Redis is away the tick waits: everything it would enqueue stays due in the
                # database, and every Redis call in it would first spend redis-py's retries.
                ping_queues()
                # `manage.py health --role scheduler` (the container's health check) reads this.
                scheduler_beat(django_rq.get_connection("default"))
                if outage.recovered(started):
                    backoff.reset()
                report = reconciler.tick()
                if report:
                    log.info("tick: %s", report)
                # Schedules and notification retries: time passed in (tests drive it with a fake clock).
                fired = triggers.tick(clock.now())
                if fired:
                    log.info("triggers: %s", fired)
                database.recovered(started)
            except REDIS_ERRORS as exc:
                outage.failed(exc)  # one line per outage, not per tick
                if options["once"]:
                    return
                pause(backoff.next(), lambda: stopping)
                continue
            except (OperationalError, InterfaceError) as exc:
                # The database away or refusing writes (a crash, a full disk): one line per episode.
                database.failed("its tick", exc, "the next tick tries again")
                close_old_connections()
            except Exception:  # noqa: BLE001 - keep reconciling; the next tick retries
                log.exception("scheduler tick failed")
                close_old_connections()
            if options["once"]:
                return
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
