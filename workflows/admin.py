"""The Django admin. Every action names the permissions it needs (`@admin.action(permissions=[...])`,
checked by Django against `has_<name>_permission`): an action a user may not take is neither offered nor
run. Custom views check the same way (decide_view). tests/security/test_permissions.py enforces both."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from workflows.adapters import breakers, llm_cache
from workflows.credentials.forms import CredentialForm
from workflows.models import (
    AuditEntry,
    BreakerState,
    Checkpoint,
    Credential,
    Event,
    LLMCacheEntry,
    ReviewItem,
    StepRun,
    WorkflowDefinition,
    WorkflowInstance,
    WorkflowVersion,
)
from workflows.operators import review
from workflows.operators.forms import ReviewDecisionForm


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    fields = ("number", "message", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(WorkflowDefinition)
class DefinitionAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "archived", "created_at")
    search_fields = ("slug", "name")
    inlines = [VersionInline]


class RuntimeRecordAdmin(admin.ModelAdmin):
    """The engine's own records: written by the runtime in one transaction with their events and
    checkpoint, never by hand. Adding one from the admin used to fail with a 500 (columns only the
    runtime fills); changing or deleting one would break the history every page replays."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HistoryAdmin(RuntimeRecordAdmin):
    """Step runs, events and checkpoints: the history itself cannot be deleted piecemeal either."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WorkflowInstance)
class InstanceAdmin(RuntimeRecordAdmin):
    list_display = ("id", "version", "status", "halt_reason", "loop_count", "created_at")
    list_filter = ("status", "halt_reason")
    search_fields = ("=id", "trace_id")
    list_select_related = ("version__definition",)
    readonly_fields = [f.name for f in WorkflowInstance._meta.fields]


@admin.register(StepRun)
class StepRunAdmin(HistoryAdmin):
    list_display = ("id", "instance", "node_id", "visit", "attempt", "status", "queue", "worker")
    list_filter = ("status", "queue")
    search_fields = ("=instance__id", "node_id", "idempotency_key")
    readonly_fields = [f.name for f in StepRun._meta.fields]


@admin.register(Event)
class EventAdmin(HistoryAdmin):
    list_display = ("instance", "seq", "type", "node_id", "created_at")
    list_filter = ("type",)
    readonly_fields = [f.name for f in Event._meta.fields]


@admin.register(Checkpoint)
class CheckpointAdmin(HistoryAdmin):
    list_display = ("instance", "seq", "checksum", "created_at")
    readonly_fields = [f.name for f in Checkpoint._meta.fields]


# --- The review queue -------------------------------------------------------------------------


def _bulk(request: HttpRequest, queryset: Any, action: str) -> None:
    done, problems = 0, []
    for item in queryset:
        try:
            review.decide(item.pk, request.user, review.Decision(action=action, note=f"bulk {action}"))
            done += 1
        except review.ReviewError as exc:
            problems.append(f"#{item.pk}: {exc}")
    if done:
        messages.success(request, f"{action}: {done} item(s) decided")
    for problem in problems:
        messages.error(request, problem)


def _note_new_items(request: HttpRequest, decided: ReviewItem) -> None:
    """A decided item leaves the open list, but a resumed instance may halt again at once (a loop that
    keeps looping): its new item looks like the old one still there. Say so."""
    for other in ReviewItem.objects.filter(instance_id=decided.instance_id, status="open").exclude(pk=decided.pk):
        messages.warning(request, f"instance #{decided.instance_id} is waiting for review again: item {other.pk} "
                                  f"({other.reason})")


@admin.register(ReviewItem)
class ReviewItemAdmin(admin.ModelAdmin):
    list_display = ("id", "instance_link", "workflow", "reason", "status", "age", "decided_by", "decide_link")
    list_filter = ("status", "reason")
    search_fields = ("=instance__id", "instance__trace_id", "node_id")
    list_select_related = ("instance__version__definition", "decided_by")
    readonly_fields = [f.name for f in ReviewItem._meta.fields]
    actions = ["approve_selected", "reject_selected", "resume_circuit_halts"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """The decide permission (operators); each item's assignee group is checked by review.decide."""
        return review.can_decide(request.user)

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        return shown if self.has_decide_permission(request) else [name for name in shown if name != "decide_link"]

    @admin.display(description="instance")
    def instance_link(self, item: ReviewItem) -> str:
        return format_html('<a href="{}">#{}</a>', reverse("instance", args=[item.instance_id]), item.instance_id)

    @admin.display(description="workflow")
    def workflow(self, item: ReviewItem) -> str:
        return str(item.instance.version)

    @admin.display(description="age", ordering="created_at")
    def age(self, item: ReviewItem) -> str:
        return timesince(item.created_at, timezone.now())

    @admin.display(description="")
    def decide_link(self, item: ReviewItem) -> str:
        if not item.is_open:
            return ""
        return format_html('<a class="button" href="{}">Decide</a>',
                           reverse("admin:workflows_reviewitem_decide", args=[item.pk]))

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Open items by default: the queue is what still needs a person.
        if not request.GET and request.method == "GET":
            return HttpResponseRedirect(f"{request.path}?status__exact=open")
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[Any]:
        return [path("<int:item_id>/decide/", self.admin_site.admin_view(self.decide_view),
                     name="workflows_reviewitem_decide"), *super().get_urls()]

    def decide_view(self, request: HttpRequest, item_id: int) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        item = get_object_or_404(ReviewItem.objects.select_related("instance__version__definition"), pk=item_id)
        refused = review.refusal(request.user, item)
        if refused is not None:
            messages.error(request, f"review item {item.pk}: {refused}")
            return HttpResponseRedirect(reverse("admin:workflows_reviewitem_changelist"))
        form = ReviewDecisionForm(request.POST or None, item=item)
        if request.method == "POST" and form.is_valid():
            try:
                review.decide(item.pk, request.user, form.decision())
            except review.ReviewError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"review item {item.pk}: {form.cleaned_data['action']} applied")
                _note_new_items(request, item)
                return HttpResponseRedirect(reverse("admin:workflows_reviewitem_changelist"))
        context = {**self.admin_site.each_context(request), "title": f"Decide: {item}", "item": item, "form": form,
                   "opts": self.model._meta, "events": item.instance.events.order_by("-seq")[:30]}
        return TemplateResponse(request, "admin/workflows/reviewitem/decide.html", context)

    @admin.action(description="Approve and continue (default grants)", permissions=["decide"])
    def approve_selected(self, request: HttpRequest, queryset: Any) -> None:
        _bulk(request, queryset.filter(status="open"), "approve")

    @admin.action(description="Reject (fail and compensate)", permissions=["decide"])
    def reject_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        open_items = queryset.filter(status="open")
        if request.POST.get("post") != "yes":
            # Rejecting fails each instance and runs its compensations: it cannot be undone, so the
            # operator sees what it will fail first (as Django's own delete action does).
            items = list(open_items.select_related("instance__version__definition"))
            if not items:
                messages.warning(request, "none of the selected items is open: nothing to reject")
                return None
            context = {**self.admin_site.each_context(request), "title": f"Reject {len(items)} review item(s)?",
                       "items": items, "opts": self.model._meta,
                       "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME}
            return TemplateResponse(request, "admin/workflows/reviewitem/reject_confirm.html", context)
        _bulk(request, open_items, "reject")
        return None

    @admin.action(description="Resume instances halted by a breaker that has closed", permissions=["decide"])
    def resume_circuit_halts(self, request: HttpRequest, queryset: Any) -> None:
        count = review.resume_circuit_halts(request.user)
        messages.success(request, f"resumed {count} instance(s) whose breaker has closed")


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "action", "instance", "review")
    list_filter = ("action",)
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(BreakerState)
class BreakerStateAdmin(admin.ModelAdmin):
    list_display = ("key", "state", "opened_at", "updated_at")
    readonly_fields = [f.name for f in BreakerState._meta.fields]
    actions = ["reset_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A row per provider key is made by the first call through it; an empty form made a keyless one.
        return False

    @admin.action(description="Close (reset) the selected breakers", permissions=["change"])
    def reset_selected(self, request: HttpRequest, queryset: Any) -> None:
        for row in queryset:
            breakers.reset(row.key)
        messages.success(request, f"reset {queryset.count()} breaker(s)")


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    """Values are write-only here as on the dashboard's page: the form never shows one, the list and
    the history name the credential only."""

    form = CredentialForm
    list_display = ("name", "kind", "base_url", "updated_at", "updated_by")
    list_filter = ("kind",)
    search_fields = ("name", "description")
    fields = ("name", "kind", "value", "base_url", "allowed_models_text", "description")

    def save_model(self, request: HttpRequest, obj: Credential, form: Any, change: bool) -> None:
        obj.updated_at = timezone.now()
        obj.updated_by = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)


@admin.register(LLMCacheEntry)
class LLMCacheEntryAdmin(admin.ModelAdmin):
    """Stored llm replies (workflows/adapters/llm_cache.py): read-only; operators delete or clear them."""

    list_display = ("workflow", "node_id", "key_prefix", "created_at", "expires_at", "hits", "source_step")
    list_filter = ("workflow",)
    readonly_fields = [f.name for f in LLMCacheEntry._meta.fields]
    actions = ["clear_workflows"]

    @admin.display(description="key")
    def key_prefix(self, obj: LLMCacheEntry) -> str:
        return obj.key[:12]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Clear the whole cache of the selected entries' workflows", permissions=["delete"])
    def clear_workflows(self, request: HttpRequest, queryset: Any) -> None:
        slugs = sorted(set(queryset.values_list("workflow__slug", flat=True)))
        deleted = sum(llm_cache.clear(workflow_slug=slug) for slug in slugs)
        messages.success(request, f"cleared {deleted} cached repl(ies) of {', '.join(slugs) or 'no workflow'}")


# Triggers and notifications register their own ModelAdmins.
import workflows.triggers.admin  # noqa: E402, F401
