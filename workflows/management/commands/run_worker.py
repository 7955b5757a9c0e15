from __future__ import annotations

import logging
from typing import Any

import django_rq
from django.core.management.base import BaseCommand, CommandError
from rq.worker import BaseWorker

from workflows import clock
from workflows.checks import PROCESS_CHECKS
from workflows.engine.priorities import queue_names
from workflows.observability import metrics  # noqa: F401 - its gauge listens to the clock (clock.listeners)
from workflows.workers.sync import ForkingStepWorker, StepWorker, make_worker

QUEUES = ("ai", "io", "default")
log = logging.getLogger("steadyflow.worker")


class Command(BaseCommand):
    help = ("Run a worker for one or more queues. The `ai` queue gets the asyncio consumer that keeps many "
            "LLM calls in flight; `io` and `default` get an RQ worker. Each queue is served at every priority "
            "(`default:high`, `default`, `default:low`): high first, low never starved.")
    requires_system_checks = PROCESS_CHECKS  # workflows/checks.py: not the URL and model checks

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("queues", nargs="+", choices=QUEUES)
        parser.add_argument("--burst", action="store_true", help="exit when the queues are empty")
        parser.add_argument("--fork", action="store_true", help="fork a work horse per job (sync queues)")
        parser.add_argument("--name", default=None, help="worker name (default: RQ's)")
        parser.add_argument("--max-in-flight", type=int, default=None, help="ai consumer: concurrent jobs")
        parser.add_argument("--sync", action="store_true",
                            help="serve the ai queue with a plain RQ worker, one LLM call at a time")

    def handle(self, *args: Any, **options: Any) -> None:
        queues = options["queues"]
        if "ai" in queues and not options["sync"] and len(queues) > 1:
            raise CommandError("the ai queue runs in its own consumer: start it separately")
        # Measure this host's offset to the database's clock now: a skew is logged at start.
        clock.register("ai" if "ai" in queues and not options["sync"] else "worker")
        if "ai" in queues and not options["sync"]:
            from workflows.workers.aiworker import run_ai_worker

            try:
                run_ai_worker(burst=options["burst"], name=options["name"],
                              max_in_flight=options["max_in_flight"])
            except KeyboardInterrupt:  # Ctrl-C while waiting for Redis, before its signal handlers
                pass
            return
        worker_class: type[BaseWorker] = ForkingStepWorker if options["fork"] else StepWorker
        # Each kind's queues, one per priority (engine/priorities.py): the worker orders them.
        rq_queues = [django_rq.get_queue(name) for kind in queues for name in queue_names(kind)]
        try:
            # Both wait for Redis while it is down, at start and later (workflows/workers/redis_outage.py).
            worker = make_worker(worker_class, rq_queues, name=options["name"])
            log.info("worker %s started on %s", worker.name, ", ".join(queues), extra={"queues": ",".join(queues)})
            worker.work(burst=options["burst"], with_scheduler=False, logging_level="WARNING")
        except KeyboardInterrupt:  # Ctrl-C before RQ's own signal handlers are installed
            pass
