"""The three roles: viewers look, designers build and run workflows, operators run and decide."""

from django.db import migrations

VIEW = ["view_workflowdefinition", "view_workflowversion", "view_workflowinstance", "view_steprun",
        "view_event", "view_checkpoint"]
ROLES = {
    "viewers": VIEW,
    "designers": VIEW + ["add_workflowdefinition", "change_workflowdefinition", "add_workflowversion",
                         "add_workflowinstance"],
    "operators": VIEW + ["add_workflowinstance", "change_workflowinstance", "operate_workflowinstance"],
}


def create_groups(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        perms = Permission.objects.filter(content_type__app_label="workflows", codename__in=codenames)
        group.permissions.add(*perms)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0002_instance_operate_permission"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_groups, remove_groups)]
