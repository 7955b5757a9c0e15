"""Give the roles their review-queue permissions."""

from django.db import migrations

ROLES = {
    "viewers": ["view_reviewitem", "view_auditentry", "view_breakerstate"],
    "designers": ["view_reviewitem", "view_auditentry", "view_breakerstate"],
    "operators": ["view_reviewitem", "change_reviewitem", "decide_reviewitem", "view_auditentry",
                  "view_breakerstate", "change_breakerstate"],
}


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                         codename__in=codenames))


class Migration(migrations.Migration):
    dependencies = [("workflows", "0004_review_audit_breaker")]
    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
