from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.credentials.store import rotate


class Command(BaseCommand):
    help = ("Re-encrypt every stored credential with the first key of STEADYFLOW_CREDENTIALS_KEY (after "
            "putting a new key first); the old key can then be removed.")

    def handle(self, *args: Any, **options: Any) -> None:
        count = rotate()
        self.stdout.write(f"re-encrypted {count} credential(s) with the first key")
