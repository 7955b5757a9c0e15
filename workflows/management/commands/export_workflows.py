from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.authoring.gitsync import SyncError, differences, export_all


class Command(BaseCommand):
    help = ("Write each workflow definition (metadata and latest graph) to DIR/<slug>.json, pretty-printed "
            "with sorted keys; unchanged files are left alone. --check writes nothing and exits 1 when the "
            "folder and the database differ.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("folder")
        parser.add_argument("--check", action="store_true", help="compare only; exit 1 on any difference")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"])
        if options["check"]:
            report_differences(self, folder)
            return
        for outcome in export_all(folder):
            self.stdout.write(f"{outcome.slug}: {outcome.action} ({outcome.path})")


def report_differences(command: BaseCommand, folder: Path) -> None:
    try:
        found = differences(folder)
    except SyncError as exc:
        raise CommandError(str(exc)) from None
    for line in found:
        command.stderr.write(f"differs: {line}")
    if found:
        raise CommandError(f"{folder}: {len(found)} difference(s) between the folder and the database")
    command.stdout.write(f"{folder}: the folder and the database agree")
