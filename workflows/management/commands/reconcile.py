from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from workflows.scheduler import reconciler
from workflows.workers.redis_outage import REDIS_ERRORS


class Command(BaseCommand):
    help = ("Run one reconcile tick (what the scheduler does every STEADYFLOW_SCHEDULER_INTERVAL_S) and "
            "print what it did as JSON: instances stopped at their deadline, steps taken back from "
            "workers that stopped heartbeating, timers and retries made due, and queued steps that no "
            "queue held re-enqueued. Safe to run at any time, also beside a running scheduler.")

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        try:
            report = reconciler.tick()
        except DatabaseError as exc:
            raise CommandError(f"reconcile failed: the database is unreachable or refused the query: {exc}") \
                from None
        except REDIS_ERRORS as exc:
            raise CommandError(f"reconcile stopped: Redis is unreachable: {exc}") from None
        result = {**asdict(report), "duration_ms": round((time.monotonic() - started) * 1000, 1)}
        self.stdout.write(json.dumps(result))
