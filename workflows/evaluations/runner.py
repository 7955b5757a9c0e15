"""Running an evaluation: rows started with bounded concurrency, scored as their instances settle.

`start` saves the chosen version's graph as the generated definition `<slug>--eval` (unchanged graphs
reuse its latest version) and queues one result per row; `advance` — called by the scheduler's tick
for every running evaluation, and in a loop by `manage.py evaluate` — scores the rows whose instance
settled and starts pending rows while fewer than `concurrency` run. Each row's instance is started
with the idempotency key `eval:<evaluation>:<row>`, so an `advance` that dies after starting one and
before recording it finds the same instance the next time. A row whose instance halts or waits on a
person is an error and its instance is cancelled: evaluations put nothing in the operators' inbox.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from workflows import runtime
from workflows.adapters.llm_cache import PurgeSchedule
from workflows.authoring.plans import GENERATED_MARK
from workflows.engine.errors import ExpressionError, PayloadTooLarge
from workflows.engine.inputs import InputInvalid
from workflows.engine.statuses import InstanceStatus
from workflows.evaluations import expectations
from workflows.evaluations.models import Dataset, Evaluation, EvaluationResult, EvaluationStatus, ResultStatus
from workflows.models import WorkflowDefinition, WorkflowInstance, WorkflowVersion

log = logging.getLogger("steadyflow.evaluations")
EVAL_SUFFIX = f"{GENERATED_MARK}eval"
SETTLED = {InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED, InstanceStatus.COMPENSATED,
           InstanceStatus.HALTED, InstanceStatus.WAITING}
MAX_CONCURRENCY = 50


def eval_slug(slug: str) -> str:
    return f"{slug[:100 - len(EVAL_SUFFIX)]}{EVAL_SUFFIX}"


def eval_copy(version: WorkflowVersion) -> WorkflowVersion:
    """The version an evaluation's rows run on: the graph as the chosen version has it, under the
    generated definition (so production's lists and figures never count its instances)."""
    source = version.definition
    with transaction.atomic():
        definition, _ = WorkflowDefinition.objects.select_for_update().get_or_create(
            slug=eval_slug(source.slug), defaults={"name": f"{source.name} (evaluations)", "archived": True})
        latest = definition.versions.order_by("-number").first()
        if latest is not None and latest.graph == version.graph:
            return latest
        number = (definition.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        return WorkflowVersion.objects.create(definition=definition, number=number, graph=version.graph,
                                              message=f"copy of {source.slug} v{version.number} for evaluations")


def start(dataset: Dataset, version: WorkflowVersion, *, user: Any = None, concurrency: int = 4) -> Evaluation:
    if version.definition_id != dataset.definition_id:
        raise ValueError(f"version {version} is not a version of {dataset.definition.slug}")
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            dataset=dataset, version=version, run_version=eval_copy(version),
            concurrency=max(1, min(int(concurrency), MAX_CONCURRENCY)),
            created_by=user if getattr(user, "pk", None) else None)
        EvaluationResult.objects.bulk_create([EvaluationResult(evaluation=evaluation, row=row)
                                              for row in dataset.rows.order_by("number")])
    advance(evaluation.pk)
    return evaluation


def advance(evaluation_id: int, now: datetime | None = None) -> bool:
    """Score what settled, start what may start; True once the evaluation is finished."""
    now = now or timezone.now()
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().select_related("run_version").get(pk=evaluation_id)
        if evaluation.status != EvaluationStatus.RUNNING:
            return True
        running = list(evaluation.results.filter(status=ResultStatus.RUNNING).select_related("row", "instance"))
        for result in running:
            if result.instance is None or result.instance.status in SETTLED:
                score(result)
        busy = sum(1 for r in running if r.status == ResultStatus.RUNNING)
        pending = list(evaluation.results.filter(status=ResultStatus.PENDING).select_related("row")
                       .order_by("row__number")[:max(evaluation.concurrency - busy, 0)])
        for result in pending:
            begin(evaluation, result)
        if not evaluation.results.filter(status__in=(ResultStatus.PENDING, ResultStatus.RUNNING)).exists():
            evaluation.status = EvaluationStatus.FINISHED
            evaluation.finished_at = now
            evaluation.summary = summarize(evaluation)
            evaluation.save(update_fields=["status", "finished_at", "summary"])
            return True
    return False


def begin(evaluation: Evaluation, result: EvaluationResult) -> None:
    try:
        instance = runtime.start_instance(evaluation.run_version, dict(result.row.input),
                                          idempotency_key=f"eval:{evaluation.pk}:{result.row.number}")
    except (InputInvalid, ExpressionError, PayloadTooLarge) as exc:
        result.status, result.checks = ResultStatus.ERROR, [{"passed": False, "detail": f"not started: {exc}"}]
        result.save(update_fields=["status", "checks"])
        return
    result.instance, result.status = instance, ResultStatus.RUNNING
    result.save(update_fields=["instance", "status"])
    if instance.status in SETTLED:  # a graph that settles as it starts
        score(result)


def score(result: EvaluationResult) -> None:
    instance = WorkflowInstance.objects.get(pk=result.instance_id) if result.instance_id else None
    if instance is None:
        result.status, result.checks = ResultStatus.ERROR, [{"passed": False, "detail": "the instance is gone"}]
        result.save(update_fields=["status", "checks"])
        return
    context = instance.context if isinstance(instance.context, dict) else {}
    result.output = context
    result.cost_usd = Decimal(instance.cost_usd or 0)
    result.tokens = int(instance.tokens or 0)
    end = instance.finished_at or instance.updated_at
    result.latency_ms = max(int((end - instance.created_at) / timedelta(milliseconds=1)), 0) if end else None
    if instance.status != InstanceStatus.COMPLETED:
        error = instance.error if isinstance(instance.error, dict) else {}
        why = instance.halt_reason or str(error.get("message", ""))
        result.status = ResultStatus.ERROR
        result.checks = [{"passed": False, "detail": f"the run ended {instance.status}" + (f": {why}" if why else "")}]
        if instance.status in (InstanceStatus.HALTED, InstanceStatus.WAITING):
            runtime.cancel_instance(instance.pk, reason="evaluation row settled (halted or waiting)")
    else:
        engine = runtime.engine_config()
        result.checks = [expectations.check(e, context, result.row.input, row_number=result.row.number,
                                            engine=engine) for e in result.row.expect]
        result.status = ResultStatus.PASSED if all(c["passed"] for c in result.checks) else ResultStatus.FAILED
    result.save(update_fields=["status", "output", "checks", "cost_usd", "tokens", "latency_ms"])


def summarize(evaluation: Evaluation) -> dict[str, Any]:
    results = list(evaluation.results.all())
    latencies = sorted(r.latency_ms for r in results if r.latency_ms is not None)
    counts = {status: sum(1 for r in results if r.status == status) for status in
              (ResultStatus.PASSED, ResultStatus.FAILED, ResultStatus.ERROR)}
    return {"rows": len(results), "passed": counts[ResultStatus.PASSED], "failed": counts[ResultStatus.FAILED],
            "errors": counts[ResultStatus.ERROR],
            "pass_rate": round(counts[ResultStatus.PASSED] / len(results), 4) if results else 0.0,
            "cost_usd": str(sum((r.cost_usd for r in results), Decimal(0))),
            "tokens": sum(r.tokens for r in results),
            "latency_ms_p50": latencies[len(latencies) // 2] if latencies else None,
            "latency_ms_max": latencies[-1] if latencies else None}


def compare(base: Evaluation, other: Evaluation) -> dict[str, Any]:
    """Row by row (by row number: both must be of the same dataset), which regressed and which were fixed,
    and what changed between the two versions' graphs."""
    if base.dataset_id != other.dataset_id:
        raise ValueError("only evaluations of the same dataset can be compared")
    before = {r.row.number: r for r in base.results.select_related("row")}
    rows = []
    for result in other.results.select_related("row").order_by("row__number"):
        old = before.get(result.row.number)
        was = old.status if old else None
        rows.append({"row": result.row.number, "label": result.row.label, "base": was, "other": result.status,
                     "regressed": was == ResultStatus.PASSED and result.status != ResultStatus.PASSED,
                     "fixed": was is not None and was != ResultStatus.PASSED and result.status == ResultStatus.PASSED,
                     "base_cost_usd": str(old.cost_usd) if old else None, "other_cost_usd": str(result.cost_usd),
                     "base_latency_ms": old.latency_ms if old else None, "other_latency_ms": result.latency_ms})
    return {"base": base.pk, "other": other.pk, "rows": rows,
            "regressions": [r["row"] for r in rows if r["regressed"]], "fixed": [r["row"] for r in rows if r["fixed"]],
            "changes": graph_changes(base.version.graph, other.version.graph),
            "summary": {"base": base.summary, "other": other.summary}}


def graph_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    def nodes(graph: dict[str, Any]) -> dict[str, Any]:
        return {str(n.get("id")): n for n in graph.get("nodes") or [] if isinstance(n, dict)}

    a, b = nodes(old), nodes(new)
    return {"added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b)),
            "changed": sorted(k for k in set(a) & set(b) if a[k] != b[k]),
            "edges_changed": [] if old.get("edges") == new.get("edges") else ["edges"],
            "settings_changed": [] if old.get("settings") == new.get("settings") else ["settings"]}


def advance_running(now: datetime) -> int:
    """The scheduler's part: advance every running evaluation; how many finished."""
    finished = 0
    for pk in Evaluation.objects.filter(status=EvaluationStatus.RUNNING).values_list("pk", flat=True)[:20]:
        try:
            finished += int(advance(pk, now))
        except Exception:  # noqa: BLE001 - one evaluation's trouble must not stop the tick
            log.exception("evaluation %s could not advance", pk)
    return finished


schedule = PurgeSchedule(advance_running, timedelta(seconds=1))  # the scheduler's tick runs it
