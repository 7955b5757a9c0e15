from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows import runtime
from workflows.authoring.definitions import save_document
from workflows.engine.errors import ExpressionError, GraphInvalid, PayloadTooLarge
from workflows.engine.inputs import InputInvalid
from workflows.engine.priorities import NORMAL, PRIORITIES
from workflows.engine.statuses import InstanceStatus
from workflows.models import WorkflowDefinition
from workflows.operators.api_shapes import run_summary

# Statuses after which waiting longer shows nothing new without a person acting.
SETTLED = {InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED, InstanceStatus.HALTED,
           InstanceStatus.COMPENSATED, InstanceStatus.WAITING}


class Command(BaseCommand):
    help = ("Start an instance of a workflow (a slug, or a graph JSON file, saved first as a new version "
            "unless the latest version holds the same graph) and print one JSON object: id, status, reason, "
            "step count, context. The input gets the workflow's declared defaults and is checked against its "
            "declared input schema.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("workflow", help="definition slug, or path to a graph JSON file")
        parser.add_argument("--input", default="{}", help="start input as a JSON object")
        parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the instance to settle")
        parser.add_argument("--idempotency-key", default=None,
                            help="a repeated key returns the instance it started (keys are per workflow)")
        parser.add_argument("--priority", choices=PRIORITIES, default=NORMAL,
                            help=("high work is taken before normal, normal before low "
                                  "(docs/architecture.md, Priorities)"))
        parser.add_argument("--burst", action="store_true",
                            help="run the steps in this process (no workers needed); implies waiting")
        parser.add_argument("--inputs", default=None, metavar="FILE",
                            help="start one instance per line of FILE (JSON objects; - for stdin), all in one "
                                 "transaction; prints one JSON line per instance")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["inputs"] is not None:
            self._start_many(options)
            return
        try:
            start_input = json.loads(options["input"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc.msg}") from None
        if not isinstance(start_input, dict):
            raise CommandError("--input must be a JSON object")
        version = self._version(options["workflow"])
        try:
            instance = runtime.start_instance(version, start_input,
                                               idempotency_key=options["idempotency_key"],
                                               priority=options["priority"])
        except (PayloadTooLarge, InputInvalid) as exc:
            raise CommandError(exc.message) from None
        except ExpressionError as exc:  # a start condition failed on this input
            raise CommandError(f"cannot start: {exc}") from None
        wait = options["wait"] or (60.0 if options["burst"] else 0.0)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            instance.refresh_from_db()
            if instance.status in SETTLED:
                break
            if options["burst"]:
                from workflows.scheduler.inprocess import drain

                drain()
            else:
                time.sleep(0.1)
        instance.refresh_from_db()
        self.stdout.write(json.dumps(run_summary(instance), default=str))

    def _start_many(self, options: dict[str, Any]) -> None:
        source = options["inputs"]
        try:
            text = self.stdin.read() if source == "-" else Path(source).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc.strerror}") from None
        inputs = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{source} line {number} is not valid JSON: {exc.msg}") from None
            if not isinstance(value, dict):
                raise CommandError(f"{source} line {number} must be a JSON object")
            inputs.append(value)
        if not inputs:
            raise CommandError(f"{source} holds no start input")
        version = self._version(options["workflow"])
        try:
            instances = runtime.start_instances(version, inputs, priority=options["priority"])
        except (PayloadTooLarge, InputInvalid) as exc:
            raise CommandError(exc.message) from None
        except ExpressionError as exc:
            raise CommandError(f"cannot start: {exc}") from None
        for instance in instances:
            self.stdout.write(json.dumps(run_summary(instance), default=str))

    @property
    def stdin(self) -> Any:
        import sys

        return sys.stdin

    def _version(self, ref: str) -> Any:
        if ref.endswith(".json") or os.path.sep in ref:
            path = Path(ref)
            try:
                document = json.loads(path.read_text())
            except OSError as exc:
                raise CommandError(f"cannot read {ref}: {exc.strerror}") from None
            except json.JSONDecodeError as exc:
                raise CommandError(f"{ref} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
            try:
                # The file's graph is saved as a new version only when it differs from the latest.
                version, _ = save_document(document, message=f"run_workflow {path.name}", skip_unchanged=True)
            except GraphInvalid as exc:
                raise CommandError("invalid graph:\n" + "\n".join(f"  {i}" for i in exc.issues)) from None
            return version
        definition = WorkflowDefinition.objects.filter(slug=ref).first()
        if definition is None:
            known = ", ".join(WorkflowDefinition.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"no workflow {ref!r} (known: {known}); run load_examples or pass a file")
        version = definition.latest_version()
        if version is None:
            raise CommandError(f"workflow {ref!r} has no saved version")
        return version


