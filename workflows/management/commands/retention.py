from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from workflows.retention import history
from workflows.retention import runner as retention


class Command(BaseCommand):
    help = ("Run retention now (the scheduler runs it anyway, a batch per tick): roll up finished days for "
            "the charts, delete the history of finished instances past STEADYFLOW_RETENTION_DAYS, prune "
            "active instances' old checkpoints. --dry-run counts what would go and changes nothing.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing, write no rollup")
        parser.add_argument("--batch", type=int, help="instances per transaction (default STEADYFLOW_RETENTION_BATCH)")
        parser.add_argument("--max-batches", type=int, default=0,
                            help="stop after this many batches (default 0: until nothing is left)")

    def handle(self, *args: Any, **options: Any) -> None:
        batch = options["batch"]
        if batch is not None and batch < 1:
            raise CommandError("--batch must be at least 1")
        if history.retention() is None:
            self.stdout.write("STEADYFLOW_RETENTION_DAYS is 0: history is kept forever (only the rollup runs)")
        dry = options["dry_run"]
        cursor = history.Cursor()
        totals: dict[str, int] = {}
        instances = rolled = pruned = batches = 0
        while True:
            outcome = retention.run_once(timezone.now(), dry_run=dry, batch=batch, budget_s=float("inf"),
                                         cursor=cursor)
            batches += 1
            rolled += outcome.rolled_days
            instances += len(outcome.instances)
            # A dry run deletes nothing: the checkpoints it counts are the same on every batch.
            pruned = outcome.checkpoints if dry and batches == 1 else pruned + (0 if dry else outcome.checkpoints)
            for label, n in outcome.rows.items():
                totals[label] = totals.get(label, 0) + n
            more = outcome.more if dry else (outcome.more or outcome.rolled_days or outcome.checkpoints)
            if not more or (options["max_batches"] and batches >= options["max_batches"]):
                break
        verb = "would delete" if dry else "deleted"
        self.stdout.write(f"{'dry run: ' if dry else ''}rolled up {rolled} day(s); {verb} the history of "
                          f"{instances} instance(s): {json.dumps(totals, sort_keys=True)}; "
                          f"{verb} {pruned} superseded checkpoint(s) of active instances")
