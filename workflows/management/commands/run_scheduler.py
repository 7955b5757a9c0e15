from __future__ import annotations

import logging
import signal
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from workflows import reconciler

log = logging.getLogger("steadyflow.scheduler")


class Command(BaseCommand):
    help = "Run the scheduler/reconciler loop: timers, retries, lost jobs, expired leases, TTLs."

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
        while not stopping:
            started = time.monotonic()
            try:
                report = reconciler.tick()
                if report:
                    log.info("tick: %s", report)
            except Exception:  # noqa: BLE001 - keep reconciling; the next tick retries
                log.exception("scheduler tick failed")
                close_old_connections()
            if options["once"]:
                return
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
