from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from workflows.authoring.gitsync import SyncError, import_all
from workflows.management.commands.export_workflows import report_differences


class Command(BaseCommand):
    help = ("Import every DIR/*.json workflow file: a new version only where the graph changed (its message "
            "names the file and its last Git commit), metadata updated in place. A bad file is reported and "
            "skipped; the command then exits 1. --check writes nothing and exits 1 when the folder and the "
            "database differ.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("folder")
        parser.add_argument("--check", action="store_true", help="compare only; exit 1 on any difference")
        parser.add_argument("--user", help="username recorded as the new versions' author")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"])
        if options["check"]:
            report_differences(self, folder)
            return
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"no user named {options['user']!r}")
        try:
            outcomes, errors = import_all(folder, user=user)
        except SyncError as exc:
            raise CommandError(str(exc)) from None
        for outcome in outcomes:
            self.stdout.write(f"{outcome.slug}: {outcome.action}")
        for error in errors:
            self.stderr.write(f"error: {error}")
        if errors:
            raise CommandError(f"{len(errors)} file(s) not imported")
