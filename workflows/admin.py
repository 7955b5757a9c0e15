from django.contrib import admin

from workflows.models import Checkpoint, Event, StepRun, WorkflowDefinition, WorkflowInstance, WorkflowVersion


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


@admin.register(WorkflowInstance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("id", "version", "status", "halt_reason", "loop_count", "created_at")
    list_filter = ("status", "halt_reason")
    search_fields = ("=id", "trace_id")
    list_select_related = ("version__definition",)
    readonly_fields = [f.name for f in WorkflowInstance._meta.fields]


@admin.register(StepRun)
class StepRunAdmin(admin.ModelAdmin):
    list_display = ("id", "instance", "node_id", "visit", "attempt", "status", "queue", "worker")
    list_filter = ("status", "queue")
    search_fields = ("=instance__id", "node_id", "idempotency_key")
    readonly_fields = [f.name for f in StepRun._meta.fields]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("instance", "seq", "type", "node_id", "created_at")
    list_filter = ("type",)
    readonly_fields = [f.name for f in Event._meta.fields]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ("instance", "seq", "checksum", "created_at")
    readonly_fields = [f.name for f in Checkpoint._meta.fields]
