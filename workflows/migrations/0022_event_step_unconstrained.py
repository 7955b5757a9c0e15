"""An event's step: no foreign key constraint, no index (issue 18, item 4; docs/DESIGN.md, "What a step's
commit writes, and only once").

An event names a step of its own instance; both are written in one transaction and deleted together
(retention empties an instance's events before its steps). The constraint made every event's COMMIT run a
trigger query that locks its step row (a Heap LOCK WAL record), and the index added an entry per event;
nothing looks events up by step. W1 on PostgreSQL: ~3,580 -> ~3,270 WAL bytes per step (bench's
BENCH_WAL_PROFILE decode, this database's records only).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0021_partial_step_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='event',
            name='step',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='workflows.steprun'),
        ),
    ]
