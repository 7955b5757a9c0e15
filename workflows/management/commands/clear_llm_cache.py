from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.adapters import llm_cache
from workflows.models import WorkflowDefinition


class Command(BaseCommand):
    help = ("Delete cached llm replies (nodes with `cache` in their config): all of them, or one workflow's "
            "(--workflow SLUG), or only the expired ones (--expired; the scheduler purges those anyway).")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--workflow", metavar="SLUG", help="only this workflow's cached replies")
        parser.add_argument("--expired", action="store_true", help="only replies past their TTL")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["workflow"]
        if slug is not None and not WorkflowDefinition.objects.filter(slug=slug).exists():
            raise CommandError(f"no workflow with slug {slug!r}")
        deleted = llm_cache.clear(workflow_slug=slug, expired_only=options["expired"])
        scope = f"workflow {slug}" if slug else "every workflow"
        self.stdout.write(f"cleared {deleted} cached llm repl{'y' if deleted == 1 else 'ies'} "
                          f"({'expired only, ' if options['expired'] else ''}{scope})")
