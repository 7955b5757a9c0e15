"""Pages of the workflow editor: the workflow list (create, duplicate, archive) and the editor itself.

The editor page is one server-rendered shell plus the ES modules in static/js/editor/, which talks to the JSON endpoints
in dashboard/api/editor_api.py and dashboard/api/core.py. The viewer role may look; the designers' permissions
decide who may change anything (the page is read-only without them).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST

from dashboard.api.shapes import input_schema
from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.authoring import plans
from workflows.engine.inputs import INPUT_SHAPE
from workflows.engine.validation import EDGE_SHAPE, NODE_SHAPE, QUEUES, SETTINGS_SHAPE
from workflows.models import WorkflowDefinition, WorkflowInstance, WorkflowVersion
from workflows.runtime import engine_config

ADD_PERM = permissions.CREATE_WORKFLOW
CHANGE_PERM = permissions.CHANGE_WORKFLOW
RUN_PERM = permissions.START
STATUS_ORDER = ["pending", "running", "waiting", "completed", "failed", "halted", "cancelled", "compensating",
                "compensated"]


def _require(request: HttpRequest, *perms: str) -> None:
    message = permissions.refusal(request.user, *perms)
    if message is not None:
        raise PermissionDenied(message)


def _unique_slug(base: str) -> str:
    """`base`, or `base-2`, `base-3`, ...: the first free one, from one statement (probing one slug at a
    time cost a statement per earlier copy: the tenth duplicate of a workflow sent eleven)."""
    base = slugify(base)[:90] or "workflow"
    taken = set(WorkflowDefinition.objects.filter(slug__startswith=base).values_list("slug", flat=True))
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    return slug


@authorize(permissions.VIEW_GRAPHS, permissions.VIEW_INSTANCES)
@require_http_methods(["GET", "POST"])
def workflow_list(request: HttpRequest) -> HttpResponse:
    """Every workflow with its latest version, its instances by status and its last run; POST creates one."""
    if request.method == "POST":
        return _create(request)
    show_archived = request.GET.get("archived") == "1"
    # The planner's generated plan definitions (workflows/authoring/plans.py) only when asked for: ?generated=1.
    show_generated = request.GET.get("generated") == "1"
    rows_of = (WorkflowDefinition.objects.filter(plans.generated()) if show_generated
               else WorkflowDefinition.objects.filter(archived=show_archived).exclude(plans.generated()))
    definitions = list(rows_of.order_by("name", "slug"))
    ids = [d.pk for d in definitions]
    latest_numbers = dict(WorkflowVersion.objects.filter(definition_id__in=ids).values_list("definition_id")
                          .annotate(n=Max("number")).order_by())
    # The list shows a version's number, message, author and time, and a run's id, status and time: graphs
    # and instance JSON stay unread.
    latest = {(v.definition_id, v.number): v for v in WorkflowVersion.objects.select_related("created_by")
              .filter(definition_id__in=ids, number__in=set(latest_numbers.values())).defer("graph")}
    by_status: dict[int, dict[str, int]] = defaultdict(dict)
    for definition_id, status, n in (WorkflowInstance.objects.filter(version__definition_id__in=ids)
                                     .values_list("version__definition_id", "status").annotate(n=Count("id"))
                                     .order_by()):
        by_status[definition_id][status] = n
    last_ids = dict(WorkflowInstance.objects.filter(version__definition_id__in=ids)
                    .values_list("version__definition_id").annotate(last=Max("id")).order_by())
    last_runs = WorkflowInstance.objects.defer("input", "context", "state", "error").in_bulk(last_ids.values())
    rows: list[dict[str, Any]] = []
    for definition in definitions:
        number = latest_numbers.get(definition.pk)
        counts = by_status.get(definition.pk, {})
        rows.append({
            "definition": definition,
            "latest": latest.get((definition.pk, number)) if number else None,
            "statuses": sorted(counts.items(), key=lambda kv: (STATUS_ORDER.index(kv[0])
                                                              if kv[0] in STATUS_ORDER else 99, kv[0])),
            "total": sum(counts.values()),
            "last_run": last_runs.get(last_ids.get(definition.pk)),
        })
    return render(request, "editor/list.html", {
        "rows": rows,
        "show_archived": show_archived,
        "show_generated": show_generated,
        "can_create": request.user.has_perm(ADD_PERM),
        "can_edit": request.user.has_perm(permissions.SAVE_VERSION),
        "can_duplicate": request.user.has_perm(ADD_PERM) and request.user.has_perm(permissions.SAVE_VERSION),
        "can_archive": request.user.has_perm(CHANGE_PERM),
        "can_run": request.user.has_perm(RUN_PERM),
    })


def _create(request: HttpRequest) -> HttpResponse:
    _require(request, ADD_PERM)
    name = request.POST.get("name", "").strip()
    slug = request.POST.get("slug", "").strip()
    if not name:
        messages.error(request, "Give the new workflow a name.")
        return redirect("workflow-list")
    if len(name) > 200:
        messages.error(request, "The name is too long (200 characters at most).")
        return redirect("workflow-list")
    if slug and slugify(slug) != slug:
        messages.error(request, f"The slug {slug!r} is not valid: use lowercase letters, digits and -.")
        return redirect("workflow-list")
    if slug and WorkflowDefinition.objects.filter(slug=slug).exists():
        messages.error(request, f"A workflow with the slug {slug!r} already exists.")
        return redirect("workflow-list")
    try:
        definition = WorkflowDefinition.objects.create(slug=slug or _unique_slug(name), name=name,
                                                       created_by=request.user)
    except IntegrityError:
        messages.error(request, "That slug was taken a moment ago: try again.")
        return redirect("workflow-list")
    # No version yet: the editor opens with a start and an end node, and the first save makes v1.
    return redirect("workflow-editor", slug=definition.slug)


@authorize(permissions.VIEW_GRAPHS)
@require_POST
def duplicate(request: HttpRequest, slug: str) -> HttpResponse:
    """A new workflow whose v1 is the latest version of this one."""
    _require(request, ADD_PERM, permissions.SAVE_VERSION)
    source = get_object_or_404(WorkflowDefinition, slug=slug)
    latest = source.latest_version()
    name = f"{source.name} (copy)"[:200]
    with transaction.atomic():
        copy = WorkflowDefinition.objects.create(slug=_unique_slug(f"{source.slug}-copy"), name=name,
                                                 description=source.description, created_by=request.user)
        if latest is not None:
            WorkflowVersion.objects.create(definition=copy, number=1, graph=latest.graph,
                                           message=f"Duplicated from {source.slug} v{latest.number}",
                                           created_by=request.user)
    messages.success(request, f"Duplicated {source.name} as {copy.name}.")
    return redirect("workflow-editor", slug=copy.slug)


@authorize(permissions.VIEW_GRAPHS)
@require_POST
def archive(request: HttpRequest, slug: str) -> HttpResponse:
    """Archive (hide, refuse new runs) or, with archived=0, bring back a workflow. Nothing is deleted."""
    _require(request, CHANGE_PERM)
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if plans.is_generated(definition.slug):
        # Restored, a planner's generated definition would be startable by hand: it stays archived.
        messages.error(request, f"{definition.slug} holds a planner's generated plans: it stays archived.")
        return redirect(f"{reverse('workflow-list')}?generated=1")
    definition.archived = request.POST.get("archived", "1") != "0"
    definition.save(update_fields=["archived"])
    if definition.archived:
        messages.success(request, f"Archived {definition.name}: it no longer starts new instances.")
        return redirect("workflow-list")
    messages.success(request, f"Restored {definition.name} from the archive.")
    return redirect(f"{reverse('workflow-list')}?archived=1")


@authorize(permissions.VIEW_GRAPHS)
def editor(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    latest = definition.latest_version()
    requested = request.GET.get("version")
    viewing = None
    if requested:
        # isdecimal and isascii: "²" is a digit to isdigit() but not to int().
        number = int(requested) if requested.isascii() and requested.isdecimal() and len(requested) < 12 else -1
        viewing = definition.versions.filter(number=number).first()
        if viewing is None:
            messages.error(request, f"{definition.name} has no version {requested}: showing the latest.")
            return redirect("workflow-editor", slug=slug)
    can_save = request.user.has_perm(permissions.SAVE_VERSION) and not definition.archived
    config = {
        "slug": definition.slug,
        "name": definition.name,
        "description": definition.description,
        "archived": definition.archived,
        "latest": latest.number if latest else None,
        # An old version opens read-only: history is immutable, restoring makes a new version.
        "version": viewing.number if viewing else (latest.number if latest else None),
        "readOnly": not can_save or (viewing is not None and viewing != latest),
        "canSave": can_save,
        "canRun": request.user.has_perm(RUN_PERM) and not definition.archived,
        "user": request.user.get_username(),
        "urls": {
            "nodeTypes": reverse("api-node-types"),
            "validate": reverse("api-validate"),
            "versions": reverse("api-editor-versions", args=[slug]),
            "version": reverse("api-editor-version", args=[slug, 0]).rsplit("/0", 1)[0] + "/",
            "diff": reverse("api-editor-diff", args=[slug]),
            "plan": reverse("api-editor-plan", args=[slug]),
            "checkExpression": reverse("api-check-expression"),
            "testNode": reverse("api-editor-test-node", args=[slug, "__node__"]),
            "functions": reverse("api-functions"),
            "mcpServers": reverse("api-mcp-servers"),
            "start": reverse("api-start", args=[slug]),
            "editor": reverse("workflow-editor", args=[slug]),
            "list": reverse("workflow-list"),
            "instance": reverse("instance", args=[0]).replace("/0/", "/{id}/"),
        },
        # The server's own shapes, so the side panel validates exactly what the validator will.
        "shapes": {"node": NODE_SHAPE, "edge": EDGE_SHAPE, "settings": SETTINGS_SHAPE, "input": INPUT_SHAPE},
        # The Run dialog's form: the latest version's declared start input (None: any JSON object).
        "inputSchema": input_schema(latest.graph) if latest else None,
        "queues": list(QUEUES),
        # Plan with AI without a configured provider offers the scripted planner (a pasted reply).
        "llmConfigured": engine_config().llm_default_provider != "scripted",
    }
    return render(request, "editor/editor.html", {"definition": definition, "config": config,
                                                  "viewing": viewing, "latest": latest})
