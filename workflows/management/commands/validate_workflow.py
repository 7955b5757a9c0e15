from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.authoring.definitions import split_document
from workflows.credentials.store import validate as validate_graph


class Command(BaseCommand):
    help = "Validate a graph JSON file. Exits 1 and lists the errors when it is invalid."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"]
        try:
            with open(path) as handle:
                document = json.load(handle)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") \
                from None
        graph, _ = split_document(document) if isinstance(document, dict) else (document, {})
        issues = validate_graph(graph)
        if issues:
            for issue in issues:
                self.stderr.write(f"error: {issue}")
            raise CommandError(f"{path}: {len(issues)} error(s)")
        self.stdout.write(f"{path}: valid")
