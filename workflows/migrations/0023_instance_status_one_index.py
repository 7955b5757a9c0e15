"""The instance's status loses its own two indexes (the btree and Django's varchar_pattern_ops twin for
LIKE, which nothing runs on a status): instance_status_deadline (status, deadline) leads with it and serves
the same lookups. Each was one more entry for every instance INSERT and status-changing (non-HOT) UPDATE
(issue 18; docs/BENCHMARKS.md, "Where a W1 and a W4 step's WAL and database time go").
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0022_event_step_unconstrained'),
    ]

    operations = [
        migrations.AlterField(
            model_name='workflowinstance',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('waiting', 'Waiting'), ('completed', 'Completed'), ('failed', 'Failed'), ('halted', 'Halted'), ('cancelled', 'Cancelled'), ('compensating', 'Compensating'), ('compensated', 'Compensated')], default='pending', max_length=16),
        ),
    ]
