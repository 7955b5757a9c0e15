"""The history tables' foreign keys to their instance lose their own index: each table already has one
leading with instance_id (steps: unique (instance, node_id, visit); events: unique (instance, seq);
snapshots: (instance, -seq); deltas: (instance, seq)) that serves the same lookups. Every index is one
more entry (and WAL record) for each row a step writes, and a step's UPDATE is never HOT (its status is
indexed): two fewer index entries per step row version, one fewer per event (docs/DESIGN.md).

On PostgreSQL the instance table also keeps 30% of each page free (fillfactor 70): every step updates
its instance's row, and an UPDATE is HOT (no new entry in any of the table's eleven indexes) only when the
new row version fits on the same page. Pages packed full made a third of them non-HOT in `make bench`'s
W1. Existing pages take the setting as they are rewritten; new rows at once."""

from collections.abc import Callable
from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def instance_fillfactor(percent: int) -> Callable[[Any, Any], None]:
    def apply(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE workflows_workflowinstance SET (fillfactor = {percent})")

    return apply


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0019_email_approvers'),
    ]

    operations = [
        migrations.RunPython(instance_fillfactor(70), instance_fillfactor(100)),
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
