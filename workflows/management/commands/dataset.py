from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.evaluations import datasets
from workflows.evaluations.models import Dataset
from workflows.models import WorkflowDefinition


class Command(BaseCommand):
    help = ("Import or export an evaluation dataset as JSONL (one row a line: {\"input\": {...}, \"expect\": [...], "
            "\"label\": \"...\"}). `dataset import WORKFLOW NAME FILE` (FILE - for stdin) replaces the dataset's rows "
            "(refused, naming the line, if any line is malformed); `dataset export WORKFLOW NAME` prints it.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["import", "export"])
        parser.add_argument("workflow")
        parser.add_argument("name")
        parser.add_argument("file", nargs="?", default="-")

    def handle(self, *args: Any, **options: Any) -> None:
        definition = WorkflowDefinition.objects.filter(slug=options["workflow"]).first()
        if definition is None:
            raise CommandError(f"no workflow {options['workflow']!r}")
        if options["action"] == "export":
            dataset = Dataset.objects.filter(definition=definition, name=options["name"]).first()
            if dataset is None:
                raise CommandError(f"workflow {definition.slug!r} has no dataset {options['name']!r}")
            self.stdout.write(datasets.export(dataset), ending="")
            return
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        try:
            dataset = datasets.save(definition, options["name"], text)
        except datasets.DatasetInvalid as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(f"{dataset}: {dataset.rows.count()} row(s)")
