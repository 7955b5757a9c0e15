from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from workflows.authoring.definitions import save_document
from workflows.evaluations import datasets
from workflows.evaluations.models import Dataset
from workflows.examples import DATASETS_DIR, DEMO_MCP_CREDENTIAL, DEMO_ORIGIN, example_files, load_example
from workflows.models import Credential, CredentialKind, WorkflowDefinition


class Command(BaseCommand):
    help = "Load the example workflows (a new version only where the graph changed). Prints their slugs."

    def handle(self, *args: Any, **options: Any) -> None:
        demo_base = settings.STEADYFLOW.get("DEMO_BASE_URL")
        ensure_demo_mcp(demo_base or DEMO_ORIGIN)
        for path in example_files():
            version, created = save_document(load_example(path, demo_base), message="example",
                                             skip_unchanged=True)
            note = f"v{version.number}" + ("" if created else " (unchanged)")
            self.stdout.write(f"{version.definition.slug} {note}")
        for path in sorted(DATASETS_DIR.glob("*.jsonl")):
            load_dataset(path)


def ensure_demo_mcp(demo_base: str) -> None:
    """The order-desk example's MCP server: the demo server's /demo/mcp (no token). Created once, and
    pointed at the demo base again when it moved (make run picks a free port); never touches a
    credential of that name that is not an MCP server."""
    url = demo_base.rstrip("/") + "/demo/mcp"
    row = Credential.objects.filter(name=DEMO_MCP_CREDENTIAL).first()
    if row is None:
        row = Credential(name=DEMO_MCP_CREDENTIAL, kind=CredentialKind.MCP_SERVER, base_url=url,
                         description="The demo MCP server of `make run` (examples: order-desk)")
        row.set_value("")
        row.save()
    elif row.kind == CredentialKind.MCP_SERVER and row.base_url != url:
        row.base_url = url
        row.save(update_fields=["base_url"])


def load_dataset(path: Path) -> None:
    """`<workflow>.<dataset>.jsonl`: an evaluation dataset of an example, loaded once (a dataset that
    exists, maybe with evaluations, is left alone)."""
    slug, _, name = path.stem.partition(".")
    definition = WorkflowDefinition.objects.filter(slug=slug).first()
    if definition is not None and not Dataset.objects.filter(definition=definition, name=name).exists():
        datasets.save(definition, name, path.read_text(encoding="utf-8"), description="example")
