# A client's idempotency key is stored with a namespace prefix (workflows/runtime/starting.py), so the
# column is a little wider than the 200 characters the API accepts.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0015_evaluations'),
    ]

    operations = [
        migrations.AlterField(
            model_name='workflowinstance',
            name='idempotency_key',
            field=models.CharField(blank=True, max_length=210, null=True),
        ),
    ]
