"""Idempotency keys unique per workflow definition, not globally.

The instance row gains its definition (its version's), filled in for existing rows, and the unique
constraint moves from the key alone to (definition, key). Keys were globally unique until now, so the
existing rows cannot conflict under the new constraint.
"""

import django.db.models.deletion
from django.db import migrations, models


def fill_definitions(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # The new foreign key is checked at commit (deferred); the UPDATE below would leave those
        # checks pending and PostgreSQL refuses to ALTER a table with pending trigger events.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    schema_editor.execute(
        "UPDATE workflows_workflowinstance SET definition_id = (SELECT v.definition_id FROM "
        "workflows_workflowversion v WHERE v.id = workflows_workflowinstance.version_id)")


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0006_search_and_dashboard_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='workflowinstance',
            name='definition',
            field=models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name='+', to='workflows.workflowdefinition'),
        ),
        migrations.RunPython(fill_definitions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='workflowinstance',
            name='definition',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name='+', to='workflows.workflowdefinition'),
        ),
        migrations.AlterField(
            model_name='workflowinstance',
            name='idempotency_key',
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddConstraint(
            model_name='workflowinstance',
            constraint=models.UniqueConstraint(fields=('definition', 'idempotency_key'),
                                               name='unique_instance_idempotency_key'),
        ),
    ]
