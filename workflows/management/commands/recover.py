from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.models import WorkflowInstance
from workflows.scheduler.recovery import latest_valid_checkpoint, restore_instance


class Command(BaseCommand):
    help = ("Check an instance's checkpoints; with --restore, put its context and scheduler state back to "
            "the newest checkpoint whose checksum verifies. Prints JSON.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("instance", type=int)
        parser.add_argument("--restore", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        instance_id = options["instance"]
        if not WorkflowInstance.objects.filter(pk=instance_id).exists():
            raise CommandError(f"no instance {instance_id}")
        found = restore_instance(instance_id) if options["restore"] else latest_valid_checkpoint(instance_id)
        self.stdout.write(json.dumps({
            "instance": instance_id,
            "checkpoint_seq": found.checkpoint.seq if found.checkpoint else None,
            "corrupt_seqs": found.corrupt,
            "restored": bool(options["restore"] and found.checkpoint),
        }))
        if found.checkpoint is None:
            raise CommandError("no checkpoint verifies")
