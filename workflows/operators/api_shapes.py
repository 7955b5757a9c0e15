"""JSON shapes shared by the API and the management commands."""

from __future__ import annotations

from typing import Any

from workflows.models import WorkflowInstance


def run_summary(instance: WorkflowInstance) -> dict[str, Any]:
    return {
        "instance": instance.pk,
        "workflow": instance.version.definition.slug,
        "version": instance.version.number,
        "status": instance.status,
        "reason": instance.halt_reason or None,
        "error": instance.error,
        "steps": instance.steps.count(),
        "loop_count": instance.loop_count,
        "tokens": instance.tokens,
        "cost_usd": float(instance.cost_usd),
        "trace_id": instance.trace_id,
        "priority": instance.priority,
        "context": instance.context,
    }
