"""Server-rendered pages."""

from __future__ import annotations

import functools
import json
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import F, OuterRef, Q, Subquery, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import NoReverseMatch, reverse

from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.authoring import plans
from workflows.engine.statuses import InstanceStatus
from workflows.models import Checkpoint, ReviewItem, StateDelta, WorkflowDefinition, WorkflowInstance, WorkflowVersion

OPERATE_PERMISSION = permissions.OPERATE


def _get_instance_for_user(request: HttpRequest, instance_id: int) -> WorkflowInstance:
    # The viewer role sees every instance (authorize on the views); there are no per-workflow permissions.
    return get_object_or_404(WorkflowInstance.objects.select_related("version__definition"), pk=instance_id)


@authorize(permissions.VIEW_INSTANCES)
def home(request: HttpRequest) -> HttpResponse:
    """The operations dashboard: figures come from /api/dashboard and refresh over the `dashboard` group."""
    from dashboard.api.stats import cached_stats

    # The cached figures: the page's script asks /api/dashboard for them right after, the same second.
    return render(request, "dashboard/home.html", {"stats": cached_stats(), "first_run": first_run(request)})


@functools.cache
def example_slugs() -> tuple[str, ...]:
    """The examples' slugs, read from their files once per process (they ship with the code)."""
    from workflows.examples import example_files, load_example

    return tuple(str(load_example(path).get("slug")) for path in example_files())


def first_run(request: HttpRequest) -> dict[str, Any] | None:
    """The examples that are loaded, each to run with its declared defaults or open in the editor. A
    newcomer's dashboard (no instance yet) leads with them and says what to do when none is loaded;
    later they stay as a smaller "Examples" card (running one again is one click), None when none is loaded."""
    newcomer = not WorkflowInstance.objects.exists()
    slugs = example_slugs()
    definitions = {d.slug: d for d in WorkflowDefinition.objects.filter(slug__in=slugs, archived=False)}
    # Every example's latest version in one statement (not one per example).
    latest_of = _latest_versions(list(definitions.values()))
    examples = []
    for slug in slugs:
        definition = definitions.get(slug)
        latest = latest_of.get(definition.pk) if definition else None
        if definition is None or latest is None:
            continue
        graph = latest.graph if isinstance(latest.graph, dict) else {}
        declared = ((graph.get("input") or {}).get("properties") or {})
        defaults = {name: field["default"] for name, field in declared.items()
                    if isinstance(field, dict) and "default" in field}
        waits_for_human = any(isinstance(n, dict) and n.get("type") == "human" for n in graph.get("nodes") or [])
        examples.append({
            "slug": slug, "name": definition.name, "description": definition.description,
            "defaults": json.dumps(defaults, ensure_ascii=False), "human": waits_for_human,
            "start_url": reverse("api-start", args=[slug]), "editor_url": reverse("workflow-editor", args=[slug]),
        })
    if not newcomer and not examples:
        return None
    return {
        "examples": examples,
        "newcomer": newcomer,
        "can_start": request.user.has_perm(permissions.START),
        "can_create": request.user.has_perm(permissions.CREATE_WORKFLOW),
    }


def _latest_versions(definitions: list[WorkflowDefinition]) -> dict[int, WorkflowVersion]:
    """{definition id: latest version}, in one statement."""
    newest = (WorkflowVersion.objects.filter(definition_id=OuterRef("definition_id")).order_by("-number")
              .values("pk")[:1])
    return {v.definition_id: v for v in WorkflowVersion.objects.filter(definition__in=definitions,
                                                                       pk=Subquery(newest))}


@authorize(permissions.VIEW_GRAPHS, permissions.VIEW_INSTANCES)
def definition_detail(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    versions = definition.versions.all()
    instances = WorkflowInstance.objects.filter(version__definition=definition)[:50]
    return render(request, "dashboard/definition.html",
                  {"definition": definition, "versions": versions, "instances": instances})


@authorize(permissions.VIEW_INSTANCES)
def instance_detail(request: HttpRequest, instance_id: int) -> HttpResponse:
    """The live instance page: the graph coloured by step state, the inspector, the timeline, the actions.
    Its state is built in the browser from the event log and kept current over the WebSocket."""
    instance = _get_instance_for_user(request, instance_id)
    return render(request, "dashboard/instance.html", _instance_page_context(request, instance))


@authorize(permissions.VIEW_INSTANCES)
def instance_list(request: HttpRequest) -> HttpResponse:
    """Every instance, filtered (workflow, status, dates, halt reason), searched by id, trace id or text in
    the input or context, paginated; `?format=json` answers the same page as JSON for the live refresh."""
    if request.GET.get("format") == "json":
        return instance_rows_json(request)
    context = _instance_list_context(request)
    context["any_instance"] = bool(context["page"].paginator.count) or WorkflowInstance.objects.exists()
    context["search_newest"] = SEARCH_NEWEST
    return render(request, "dashboard/instances.html", context)


def _instance_page_context(request: HttpRequest, instance: WorkflowInstance) -> dict[str, Any]:
    from dashboard.pages import review_facts
    from workflows.operators import operations, review

    can_operate = request.user.has_perm(OPERATE_PERMISSION)
    item = instance.reviews.filter(status="open").order_by("-created_at").first()
    # Per item: a human task may be for a group the user is not in (workflows/operators/review.py refusal).
    decide_refusal = review.refusal(request.user, item)
    node_types = node_types_for_pages()
    urls = {
        "instance": reverse("api-instance", args=[instance.pk]),
        "events": reverse("api-instance-events", args=[instance.pk]),
        "steps": reverse("api-instance-steps", args=[instance.pk]),
        "cancel": reverse("api-instance-cancel", args=[instance.pk]),
        "retry": reverse("api-instance-retry", args=[instance.pk]),
        "rerun": reverse("api-instance-rerun", args=[instance.pk]),
        "review": reverse("api-instance-review", args=[instance.pk]),
        "ws": f"/ws/instances/{instance.pk}/",
        "reviewDetail": _url_template("review-detail"),
        "reviewNext": reverse("review-next"),
    }
    config = {
        "instance": {
            "id": instance.pk, "status": instance.status, "reason": instance.halt_reason, "error": instance.error,
            "workflow": instance.version.definition.slug, "version": instance.version.number,
            "last_seq": instance.event_seq, "input": instance.input, "context": instance.context,
        },
        "graph": instance.version.graph,
        "nodeTypes": node_types,
        "urls": urls,
        "canOperate": can_operate,
        "canCancel": operations.may_cancel(request.user, instance),
        "canDecide": decide_refusal is None,
        "decideRefusal": decide_refusal,
        # Halts and human tasks alike: the decision panel (static/js/review/panel.js) is built from `why`.
        "review": {"id": item.pk, "reason": item.reason, "node": item.node_id, "details": item.details,
                   "why": review_facts.why(item, instance)}
        if item else None,
        "reviewActions": list(review.ACTIONS),
        "parent": _parent_link(instance),
    }
    return {"instance": instance, "config": config, "can_operate": can_operate, "review_item": item,
            "can_decide": decide_refusal is None, "decide_refusal": decide_refusal, "parent": config["parent"]}


def _parent_link(instance: WorkflowInstance) -> dict[str, Any] | None:
    """A sub-workflow's page says which step of which instance started it."""
    step = instance.parent_step
    if step is None:
        return None
    return {"instance": step.instance_id, "node": step.node_id, "visit": step.visit, "step": step.pk,
            "url": reverse("instance", args=[step.instance_id])}


def node_types_for_pages() -> list[dict[str, Any]]:
    """The node kinds as the read-only graphs draw them (icons, colours), without their config schemas."""
    from workflows.engine.nodes import known_kinds

    return [{k: v for k, v in kind.describe().items() if k != "schema"} for kind in known_kinds().values()]


def _url_template(name: str) -> str | None:
    """A URL with `{id}` where its one integer argument goes (None when the page does not exist)."""
    try:
        return reverse(name, args=[987654321]).replace("987654321", "{id}")
    except NoReverseMatch:
        return None


INSTANCE_PAGE_SIZE = 50
# The columns a list of instances never shows (instance list, its JSON refresh): left unread.
LIST_DEFERRED = ("input", "context", "state", "error", "version__graph", "parent_step__input", "parent_step__output",
                 "parent_step__usage", "parent_step__error")
KNOWN_REASONS = ("step_failed", "dead_end", "loop_breaker", "circuit_open", "ttl_expired", "budget_exceeded",
                 "poison_step", "compensation_failed", "rejected", "cancelled")


def _parse_day(raw: str, name: str, errors: list[str]) -> datetime | None:
    if not raw:
        return None
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        errors.append(f"'{name}' must be a date like 2026-01-31, not {raw!r}")
        return None
    if day >= date.max:
        # The filter adds a day to the end date: the last date there is would overflow.
        errors.append(f"'{name}' must be before {date.max.isoformat()}")
        return None
    return datetime.combine(day, time.min, tzinfo=UTC)


def _instance_list_context(request: HttpRequest) -> dict[str, Any]:
    get = request.GET
    filters = {key: get.get(key, "").strip() for key in ("workflow", "status", "reason", "from", "to", "q")}
    errors: list[str] = []
    instances = WorkflowInstance.objects.all()
    if filters["workflow"]:
        # Through the version ids: an indexed IN on the instance table, no join to filter on.
        versions = list(WorkflowVersion.objects.filter(definition__slug=filters["workflow"])
                        .values_list("pk", flat=True))
        instances = instances.filter(version_id__in=versions)
    statuses = [status.value for status in InstanceStatus]
    if filters["status"] and filters["status"] not in statuses:
        # An unknown status used to filter down to nothing without a word.
        errors.append(f"'status' must be one of {', '.join(statuses)}, not {filters['status']!r}: showing every "
                      "status")
        filters["status"] = ""
    if filters["status"]:
        instances = instances.filter(status=filters["status"])
    if filters["reason"]:
        # Halted for that reason now, or ever: a decided review item clears the instance's halt_reason,
        # and the instance must not drop out of the filter the moment an operator answers it.
        reviewed = ReviewItem.objects.filter(reason=filters["reason"]).values("instance_id")
        instances = instances.filter(Q(halt_reason=filters["reason"]) | Q(pk__in=reviewed))
    start = _parse_day(filters["from"], "from", errors)
    end = _parse_day(filters["to"], "to", errors)
    if start:
        instances = instances.filter(created_at__gte=start)
    if end:
        instances = instances.filter(created_at__lt=end + timedelta(days=1))
    query = filters["q"].lstrip("#")
    if len(query) > SEARCH_MOST_CHARS:
        errors.append(f"the search text is cut to its first {SEARCH_MOST_CHARS} characters")
        query = query[:SEARCH_MOST_CHARS]
    if query:
        if query.isascii() and query.isdecimal() and len(query) < 19:  # not "²", which int() refuses
            instances = instances.filter(pk=int(query))
        else:
            # A whole traceparent, or just its 32-hex trace id (substrings of the stored value), or
            # text in the start input or the context.
            instances = instances.filter(Q(trace_id__contains=query.lower()) | json_text_matches(query))
    # A row shows ids, statuses and times: its JSON (input, context, state, error), its version's graph and
    # its parent step's payloads stay unread (decoding them for 50 rows was most of the page's time).
    rows = (instances.select_related("version__definition", "parent_step").defer(*LIST_DEFERRED)
            .order_by("-id"))
    paginator = Paginator(rows, INSTANCE_PAGE_SIZE)
    page = paginator.get_page(get.get("page"))
    kept = {k: v for k, v in filters.items() if v}
    return {
        "page": page,
        "filters": filters,
        "errors": errors,
        "query_string": urlencode(kept),
        "workflows": WorkflowDefinition.objects.exclude(plans.generated()).order_by("slug")
                     .values_list("slug", flat=True),
        "statuses": statuses,
        "reasons": sorted(set(KNOWN_REASONS) | ({filters["reason"]} if filters["reason"] else set())),
    }


SEARCH_MOST_CHARS = 200
# The input/context text search reads each candidate row's JSON: it is bounded to the newest instances
# (a primary-key range, so the index limits the rows read) rather than the whole table.
SEARCH_NEWEST = 20_000


def json_text_matches(query: str) -> Q:
    """Instances among the newest SEARCH_NEWEST whose input or context, as JSON text, contains `query`
    (case-insensitive). PostgreSQL: the jsonb cast to text. SQLite: the stored JSON text, where Django
    escaped non-ASCII characters and quotes (json.dumps), so the escaped form is searched too."""
    newest = WorkflowInstance.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    forms = {query, json.dumps(query)[1:-1]}
    text = Q()
    for form in forms:
        text |= Q(input_text__icontains=form) | Q(context_text__icontains=form)
    ids = (WorkflowInstance.objects.filter(pk__gt=newest - SEARCH_NEWEST)
           .annotate(input_text=Cast("input", TextField()), context_text=Cast("context", TextField()))
           .filter(text).values("pk"))
    # The context is the newest snapshot (or the creation value in the column) plus the deltas after
    # it (docs/DESIGN.md "State: deltas and snapshots"); a value overwritten since may match too.
    delta_text = Q()
    snapshot_text = Q()
    for form in forms:
        delta_text |= Q(delta_text__icontains=form)
        snapshot_text |= Q(state_text__icontains=form)
    in_deltas = (StateDelta.objects.filter(instance_id__gt=newest - SEARCH_NEWEST)
                 .annotate(delta_text=Cast("delta", TextField())).filter(delta_text).values("instance_id"))
    in_snapshot = (Checkpoint.objects.filter(instance_id__gt=newest - SEARCH_NEWEST, seq=F("instance__snapshot_seq"))
                   .annotate(state_text=Cast(KeyTransform("context", "state"), TextField())).filter(snapshot_text)
                   .values("instance_id"))
    return Q(pk__in=ids) | Q(pk__in=in_deltas) | Q(pk__in=in_snapshot)


def instance_rows_json(request: HttpRequest) -> JsonResponse:
    """The instance list's current page as JSON (`?format=json`, what the page's script refreshes from)."""
    from dashboard.templatetags.timestamps import stamp

    context = _instance_list_context(request)
    page = context["page"]
    return JsonResponse({
        "count": page.paginator.count, "page": page.number, "pages": page.paginator.num_pages,
        "errors": context["errors"],
        "instances": [{
            "id": i.pk, "url": reverse("instance", args=[i.pk]), "workflow": i.version.definition.slug,
            "version": i.version.number, "status": i.status, "reason": i.halt_reason,
            "created_at": stamp(i.created_at), "finished_at": stamp(i.finished_at), "trace_id": i.trace_id,
            # A child instance (sub-workflow, planner) names the instance that started it.
            "parent": i.parent_step.instance_id if i.parent_step is not None else None,
        } for i in page.object_list],
    })


def healthz(request: HttpRequest) -> JsonResponse:
    """For load balancers: the checks of `manage.py health --role web` (database, Redis, migrations).
    503 when the database or the migrations fail, naming the failing checks; a Redis outage alone is
    200 with `degraded`: the pages and the API keep working without Redis (live updates pause and starts
    are enqueued when it is back, workflows/workers/redis_outage.py), so taking every replica out of a load
    balancer would turn a degraded site into a dead one. Public, so it names checks, never details."""
    from workflows.operators.health import run_checks

    report = run_checks("web")
    failing = sorted(report.problems)
    if report.ok:
        return JsonResponse({"ok": True, "checks": report.passed})
    if failing == ["redis"]:
        return JsonResponse({"ok": True, "degraded": failing, "checks": report.passed})
    return JsonResponse({"ok": False, "failing": failing}, status=503)
