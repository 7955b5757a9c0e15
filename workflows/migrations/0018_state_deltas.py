"""State deltas and snapshots (docs/DESIGN.md "State: deltas and snapshots"): the instance row keeps
small bookkeeping, the context lives in snapshots (Checkpoint) plus StateDelta rows.

Existing instances: their row (the source of truth until now) becomes their snapshot at their
current seq. When their newest checkpoint already holds exactly that state (the common case: every
transition wrote one) it is kept as the snapshot instead of writing another.
"""

import hashlib
import json

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def context_size(context):
    # runtime/config.json_size
    return sum(len(json.dumps(k, default=str)) + len(json.dumps(v, default=str)) + 4 for k, v in context.items())


def snapshot_existing(apps, schema_editor):
    Instance = apps.get_model("workflows", "WorkflowInstance")
    Checkpoint = apps.get_model("workflows", "Checkpoint")
    for inst in Instance.objects.order_by("pk").iterator(chunk_size=500):
        state = {"context": inst.context, "state": inst.state, "loop_count": inst.loop_count,
                 "open_steps": inst.open_steps, "status": str(inst.status), "seq": inst.event_seq}
        text = canonical(state)
        checksum = hashlib.sha256(text.encode()).hexdigest()
        newest = Checkpoint.objects.filter(instance_id=inst.pk).order_by("-seq", "-id").first()
        if newest is None or newest.seq != inst.event_seq or newest.checksum != checksum:
            Checkpoint.objects.create(instance_id=inst.pk, seq=inst.event_seq, state=state, checksum=checksum)
        Instance.objects.filter(pk=inst.pk).update(context_seq=inst.event_seq, snapshot_seq=inst.event_seq,
                                                  snapshot_bytes=len(text), delta_bytes=0,
                                                  context_bytes=context_size(inst.context or {}))


def context_back_to_rows(apps, schema_editor):
    """Backwards: the row holds the current context again (newest snapshot plus the deltas after it)."""
    Instance = apps.get_model("workflows", "WorkflowInstance")
    Checkpoint = apps.get_model("workflows", "Checkpoint")
    StateDelta = apps.get_model("workflows", "StateDelta")
    for inst in Instance.objects.order_by("pk").iterator(chunk_size=500):
        newest = Checkpoint.objects.filter(instance_id=inst.pk).order_by("-seq", "-id").first()
        context = dict(newest.state.get("context") or {}) if newest is not None else dict(inst.context or {})
        for row in StateDelta.objects.filter(instance_id=inst.pk, seq__gt=newest.seq if newest else 0).order_by(
                "seq", "id"):
            context.update(row.delta.get("set") or {})
            for key in row.delta.get("unset") or ():
                context.pop(key, None)
        Instance.objects.filter(pk=inst.pk).update(context=context)


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0017_retention_daily_rollup'),
    ]

    operations = [
        migrations.AddField(
            model_name='workflowinstance',
            name='context_seq',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='workflowinstance',
            name='delta_bytes',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='workflowinstance',
            name='snapshot_bytes',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='workflowinstance',
            name='snapshot_seq',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='workflowinstance',
            name='context_bytes',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name='StateDelta',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveIntegerField()),
                ('delta', models.JSONField()),
                ('checksum', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('instance', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deltas', to='workflows.workflowinstance')),
            ],
            options={
                'indexes': [models.Index(fields=['instance', 'seq'], name='statedelta_instance_seq')],
            },
        ),
        migrations.RunPython(snapshot_existing, context_back_to_rows),
    ]
