"""`manage.py health`: a probe for container health checks and operators (exit 0 = healthy, 1 = not).

`--role web|worker|scheduler` checks what a container of that kind needs (compose's health checks);
the default, `all`, checks the whole deployment: database, Redis, migrations, a live worker for every
queue, the scheduler's heartbeat, the queues' oldest job, and instances without progress for longer
than --threshold seconds (workflows/scheduler/stuck.py). The checks live in
workflows/operators/health.py, shared with `/healthz`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from workflows.checks import PROCESS_CHECKS
from workflows.operators.health import CHECK_NAMES, QUEUES, ROLES, Report, run_checks

LIST_LIMIT = 100


class Command(BaseCommand):
    help = ("Health probe: exits 0 and prints one OK line when the role's checks pass; otherwise exits 1 "
            "with one line per failing check (and the stuck instances, with the step that holds each up).")
    requires_system_checks = PROCESS_CHECKS  # workflows/checks.py: not the URL and model checks

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--role", choices=tuple(ROLES), default="all",
                            help="what to check: a web, worker or scheduler container, or all (default)")
        parser.add_argument("--queue", action="append", choices=QUEUES, dest="queues", default=None,
                            help="--role worker: a queue this host must serve (repeatable; default all three)")
        parser.add_argument("--skip", action="append", choices=CHECK_NAMES, default=[],
                            help="leave a check out (repeatable)")
        parser.add_argument("--threshold", type=float, default=None,
                            help="seconds without progress before an instance counts as stuck, and the "
                                 "longest a queued job may wait (default STEADYFLOW_STUCK_AFTER_S, 300)")
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        threshold = options["threshold"]
        if threshold is None:
            threshold = float(settings.STEADYFLOW.get("STUCK_AFTER_S", 300.0))
        if threshold <= 0:
            self.stderr.write("--threshold must be a positive number of seconds")
            sys.exit(2)
        report = run_checks(options["role"], queues=options["queues"] or (), skip=options["skip"],
                            threshold_s=threshold)
        if options["json"]:
            self.stdout.write(json.dumps(as_json(report)))
        else:
            self._print(report)
        if not report.ok:
            sys.exit(1)

    def _print(self, report: Report) -> None:
        if report.ok:
            self.stdout.write(f"OK ({report.role}): {', '.join(report.passed)}")
            return
        for name, problem in report.problems.items():
            self.stdout.write(f"{name}: {problem}")
        stuck = report.details.get("stuck") or []
        for s in stuck[:LIST_LIMIT]:
            self.stdout.write(f"  instance {s.id} ({s.definition} v{s.version}, {s.status}, "
                              f"idle {s.idle_s:g} s): {s.reason}")
        if len(stuck) > LIST_LIMIT:
            self.stdout.write(f"  ... and {len(stuck) - LIST_LIMIT} more")


def as_json(report: Report) -> dict[str, Any]:
    stuck = report.details.get("stuck") or []
    return {
        "ok": report.ok, "role": report.role, "threshold_s": report.details["threshold_s"],
        "checks": {**{name: "ok" for name in report.passed}, **report.problems},
        # Kept at the top level for scripts written against the first version of this command.
        "database": report.problems.get("database", "ok"), "redis": report.problems.get("redis", "ok"),
        "workers": report.details.get("workers"), "queues": report.details.get("queues"),
        "stuck": [asdict(s) for s in stuck[:LIST_LIMIT]], "stuck_count": len(stuck),
        # Each worker's, ai consumer's and scheduler's offset to the database's clock (role all).
        "clocks": report.details.get("clocks"),
    }
