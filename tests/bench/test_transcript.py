"""bench/transcript.py (W4) and bench/storage.py: the loop runs its steps, each adding a new context key
of incompressible text, and the meters read what the workload wrote."""

from __future__ import annotations

import base64
import zlib

import pytest

from bench import transcript
from bench.storage import WalMeter, history_tables, instance_row_bytes, table_bytes
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import StepRun
from workflows.scheduler import inprocess


@pytest.mark.django_db(transaction=True)
def test_the_transcript_loop_grows_the_context_by_one_key_per_step(redis_conn):
    version = save_version("bench-transcript-test", transcript.transcript_graph(steps=25, size=300))
    with WalMeter() as wal:
        inst = runtime.start_instance(version, {})
        inprocess.drain()
    inst.refresh_from_db()
    assert inst.status == "completed"
    notes = {k: v for k, v in inst.context.items() if k.startswith("note_")}
    assert sorted(notes) == sorted(f"note_{i}" for i in range(1, 26))
    assert all(len(v) == 300 for v in notes.values())
    raw = base64.b64decode(notes["note_1"] + "=" * (-len(notes["note_1"]) % 4))
    assert len(zlib.compress(raw)) >= len(raw)  # random bytes: incompressible
    assert StepRun.objects.filter(instance=inst, node_id="grow", status="succeeded").count() == 25
    gaps = transcript.step_gaps(inst.pk)
    assert len(gaps) == 25 and all(g >= 0 for g in gaps)
    both = transcript.ends([gaps])
    assert both["first10_ms"] is not None and both["growth"] is not None
    figures = wal.per_step(25)
    assert "wal_bytes_per_step" in figures
    if figures["wal_bytes_per_step"] is not None:  # PostgreSQL
        assert figures["wal_bytes_per_step"] > 300
        rows = instance_row_bytes(inst.pk)
        assert rows is not None and rows["workflows_steprun"] > 0 and rows["workflows_checkpoint"] > 0
    assert {"workflows_workflowinstance", "workflows_steprun", "workflows_event",
            "workflows_checkpoint"} <= set(history_tables())
    assert (table_bytes() or 0) > 0
