"""Partial indexes on the step table, on PostgreSQL (issue 18; docs/DESIGN.md, "What a step's commit
writes, and only once").

The scheduler's due-time and lease indexes hold only the steps that can still run, the dashboard's
finished_at index only finished steps. A step is then in neither status index once it finishes: its
INSERT and its finishing UPDATE each add 3 index entries instead of 5 (W1: 4,084 -> 3,621 WAL bytes per
step), and the indexes grow with the open work, not with the stored history.

SQLite keeps full indexes under the same names: its planner uses a partial index only when the query
spells out the predicate's own literal values, and Django binds them as parameters (`status = ?`), so
there every scheduler query would scan the whole step table. The model's Meta declares the PostgreSQL
form; the names are the same on both, so a later migration can drop or replace them by name.
"""

from django.db import migrations, models

OLD = ("step_status_due", "step_status_lease", "step_finished_at")

POSTGRES = (
    "CREATE INDEX step_open_due ON workflows_steprun (status, due_at) "
    "WHERE status IN ('pending', 'queued', 'retrying')",
    "CREATE INDEX step_running_lease ON workflows_steprun (lease_until) WHERE status = 'running'",
    "CREATE INDEX step_finished ON workflows_steprun (finished_at) WHERE finished_at IS NOT NULL",
)
FULL = (
    "CREATE INDEX step_open_due ON workflows_steprun (status, due_at)",
    "CREATE INDEX step_running_lease ON workflows_steprun (status, lease_until)",
    "CREATE INDEX step_finished ON workflows_steprun (finished_at)",
)


def forwards(apps, schema_editor):
    # Created first: the scheduler's queries always have an index.
    for statement in POSTGRES if schema_editor.connection.vendor == "postgresql" else FULL:
        schema_editor.execute(statement)
    for name in OLD:
        schema_editor.execute(f"DROP INDEX {name}")


def backwards(apps, schema_editor):
    schema_editor.execute("CREATE INDEX step_status_due ON workflows_steprun (status, due_at)")
    schema_editor.execute("CREATE INDEX step_status_lease ON workflows_steprun (status, lease_until)")
    schema_editor.execute("CREATE INDEX step_finished_at ON workflows_steprun (finished_at)")
    for name in ("step_open_due", "step_running_lease", "step_finished"):
        schema_editor.execute(f"DROP INDEX {name}")


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0020_leaner_step_writes'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.RemoveIndex(model_name='steprun', name='step_status_due'),
                migrations.RemoveIndex(model_name='steprun', name='step_status_lease'),
                migrations.RemoveIndex(model_name='steprun', name='step_finished_at'),
                migrations.AddIndex(
                    model_name='steprun',
                    index=models.Index(condition=models.Q(('status__in', ['pending', 'queued', 'retrying'])),
                                       fields=['status', 'due_at'], name='step_open_due'),
                ),
                migrations.AddIndex(
                    model_name='steprun',
                    index=models.Index(condition=models.Q(('status', 'running')), fields=['lease_until'],
                                       name='step_running_lease'),
                ),
                migrations.AddIndex(
                    model_name='steprun',
                    index=models.Index(condition=models.Q(('finished_at__isnull', False)), fields=['finished_at'],
                                       name='step_finished'),
                ),
            ],
        ),
    ]
