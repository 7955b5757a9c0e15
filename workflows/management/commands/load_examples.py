from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from workflows.authoring.definitions import save_document
from workflows.examples import example_files, load_example


class Command(BaseCommand):
    help = "Load the example workflows (a new version only where the graph changed). Prints their slugs."

    def handle(self, *args: Any, **options: Any) -> None:
        demo_base = settings.STEADYFLOW.get("DEMO_BASE_URL")
        for path in example_files():
            version, created = save_document(load_example(path, demo_base), message="example",
                                             skip_unchanged=True)
            note = f"v{version.number}" + ("" if created else " (unchanged)")
            self.stdout.write(f"{version.definition.slug} {note}")
