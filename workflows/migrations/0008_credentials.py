"""The credentials store (workflows/credentials/store.py); designers manage credentials."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


DESIGNER_CODENAMES = ["view_credential", "add_credential", "change_credential", "delete_credential"]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="designers")
    group.permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                     codename__in=DESIGNER_CODENAMES))


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0007_instance_idempotency_per_definition'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Credential',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64, unique=True)),
                ('kind', models.CharField(choices=[('secret', 'Secret (referenced as {{ secrets.NAME }})'), ('llm_provider', 'LLM provider (base URL, key, models)')], default='secret', max_length=16)),
                ('encrypted_value', models.TextField(editable=False)),
                ('base_url', models.URLField(blank=True, max_length=500)),
                ('allowed_models', models.JSONField(blank=True, default=list)),
                ('description', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.RunPython(grant, migrations.RunPython.noop),
    ]
