"""Issue 19, item 15 (the run report): building an instance's report never loads its steps' whole
outputs (up to MAX_PAYLOAD_BYTES each): only the two keys it reads, with rows streamed in chunks."""

from __future__ import annotations

import tracemalloc
from typing import Any

from django.test import Client

from workflows.models import StepRun, WorkflowInstance

STEPS = 40
BIG = "x" * 250_000  # per step: 10 MB of outputs in all


def test_the_report_does_not_hold_the_steps_outputs(admin_client_: Client, instance: WorkflowInstance) -> None:
    template = StepRun.objects.filter(instance=instance).first()
    assert template is not None
    StepRun.objects.bulk_create([StepRun(
        instance_id=instance.pk, node_id="work", node_type="python", visit=n + 2, status="succeeded",
        queue="default", idempotency_key=f"big-{n}", trace_id=template.trace_id,
        output={"text": BIG, "tool_calls": [{"id": "c1"}, {"id": "c2"}], "cache": {"hit": True}})
        for n in range(STEPS)])
    admin_client_.get(f"/api/instances/{instance.pk}/report")  # warm up (imports, templates)
    tracemalloc.start()
    try:
        response = admin_client_.get(f"/api/instances/{instance.pk}/report")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 200
    report: dict[str, Any] = response.json()
    big = [s for s in report["steps"] if s["visit"] >= 2]
    assert len(big) == STEPS and all(s["tool_calls"] == 2 and s["cache"] == {"hit": True} for s in big)
    assert peak < 4_000_000, f"peak {peak / 1e6:.1f} MB for {STEPS * len(BIG) / 1e6:.0f} MB of outputs"
