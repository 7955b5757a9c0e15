"""Smaller rows and fewer index entries per step (issue 18, item 4; docs/DESIGN.md, "State: deltas and
snapshots").

- The history tables' foreign keys to their instance lose their own index: each table already has one
  leading with instance_id (steps: unique (instance, node_id, visit); events: unique (instance, seq);
  snapshots: (instance, -seq); deltas: (instance, seq)) that serves the same lookups. Every index is
  one more entry (and WAL record) for each row a step writes, and a step's UPDATE is never HOT (its
  status is indexed): two fewer index entries per step row version, one fewer per event.
- Events lose their trace id: a copy of the instance's on every row (56 bytes), never read.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0019_email_approvers'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='event',
            name='trace_id',
        ),
        migrations.AlterField(
            model_name='checkpoint',
            name='instance',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='checkpoints', to='workflows.workflowinstance'),
        ),
        migrations.AlterField(
            model_name='event',
            name='instance',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='workflows.workflowinstance'),
        ),
        migrations.AlterField(
            model_name='statedelta',
            name='instance',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deltas', to='workflows.workflowinstance'),
        ),
        migrations.AlterField(
            model_name='steprun',
            name='instance',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='workflows.workflowinstance'),
        ),
    ]
