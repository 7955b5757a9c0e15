from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.evaluations import runner
from workflows.evaluations.models import Dataset, Evaluation, EvaluationStatus
from workflows.models import WorkflowDefinition, WorkflowVersion


class Command(BaseCommand):
    help = ("Run a version of a workflow over one of its datasets, print each row's outcome and a summary as "
            "JSON, and exit 1 on a regression: a row that passed in the baseline (--baseline VERSION, or the "
            "latest finished evaluation of another version on this dataset) and does not now; without a "
            "baseline, any row that does not pass. --burst runs the steps in this process (no workers needed).")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        # `--version N` is the version to evaluate, not Django's own --version (which would conflict).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("workflow")
        parser.add_argument("--version", type=int, help="the version to evaluate (default: the latest)")
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--baseline", type=int, help="compare with the latest evaluation of this version")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every row")
        parser.add_argument("--burst", action="store_true", help="run the steps in this process")

    def handle(self, *args: Any, **options: Any) -> None:
        definition = WorkflowDefinition.objects.filter(slug=options["workflow"]).first()
        if definition is None:
            raise CommandError(f"no workflow {options['workflow']!r}")
        dataset = Dataset.objects.filter(definition=definition, name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"workflow {definition.slug!r} has no dataset {options['dataset']!r}")
        versions = definition.versions.order_by("-number")
        version: WorkflowVersion | None = (versions.filter(number=options["version"]).first() if options["version"]
                                           else versions.first())
        if version is None:
            raise CommandError(f"workflow {definition.slug!r} has no version {options['version']}")
        baseline = self.baseline(dataset, version, options["baseline"])
        evaluation = runner.start(dataset, version, concurrency=options["concurrency"])
        deadline = time.monotonic() + options["timeout"]
        while not runner.advance(evaluation.pk):
            if time.monotonic() > deadline:
                raise CommandError(f"evaluation {evaluation.pk} did not finish within {options['timeout']:g} s")
            if options["burst"]:
                from workflows.scheduler import inprocess

                inprocess.drain()
            else:
                time.sleep(0.5)
        evaluation.refresh_from_db()
        for result in evaluation.results.select_related("row").order_by("row__number"):
            failed = [c.get("detail", "") for c in result.checks if not c.get("passed")]
            self.stderr.write(f"row {result.row.number} {result.row.label or ''}: {result.status}"
                              + (f" — {'; '.join(failed)}" if failed else ""))
        report: dict[str, Any] = {"evaluation": evaluation.pk, "workflow": definition.slug, "version": version.number,
                                  "dataset": dataset.name, **evaluation.summary}
        if baseline is not None:
            comparison = runner.compare(baseline, evaluation)
            report.update(baseline_version=baseline.version.number, regressions=comparison["regressions"],
                          fixed=comparison["fixed"])
            failing = bool(comparison["regressions"])
        else:
            failing = evaluation.summary["passed"] < evaluation.summary["rows"]
        self.stdout.write(json.dumps(report, sort_keys=True))
        if failing:
            raise CommandError("regression: " + (f"rows {report['regressions']} passed in v{report['baseline_version']}"
                                                 if baseline is not None else "not every row passed"))

    def baseline(self, dataset: Dataset, version: WorkflowVersion, number: int | None) -> Evaluation | None:
        finished = Evaluation.objects.filter(dataset=dataset, status=EvaluationStatus.FINISHED).order_by("-finished_at")
        if number is not None:
            found = finished.filter(version__number=number).first()
            if found is None:
                raise CommandError(f"no finished evaluation of v{number} on dataset {dataset.name!r}")
            return found
        return finished.exclude(version=version).first()
