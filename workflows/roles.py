"""The three roles and their permissions. Migrations 0003, 0005 and 0007 create them; `ensure_roles` puts
them back where a database was flushed (transactional tests) or a deployment deleted one."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

_VIEW = ["view_workflowdefinition", "view_workflowversion", "view_workflowinstance", "view_steprun",
         "view_event", "view_checkpoint", "view_reviewitem", "view_auditentry", "view_breakerstate",
         "view_webhook", "view_webhookrejection", "view_schedule", "view_schedulefire", "view_llmcacheentry"]
# Triggers are part of designing a workflow; notification channels are the operators' pager.
_DESIGN_TRIGGERS = ["add_webhook", "change_webhook", "delete_webhook", "add_schedule", "change_schedule",
                    "delete_schedule"]
_NOTIFY = ["view_notificationchannel", "add_notificationchannel", "change_notificationchannel",
           "delete_notificationchannel", "view_notificationdelivery", "view_deliveryattempt"]
ROLES: dict[str, list[str]] = {
    "viewers": _VIEW,
    "designers": _VIEW + ["add_workflowdefinition", "change_workflowdefinition", "add_workflowversion",
                          "add_workflowinstance", "view_credential", "add_credential", "change_credential",
                          "delete_credential"] + _DESIGN_TRIGGERS,
    "operators": _VIEW + ["add_workflowinstance", "change_workflowinstance", "operate_workflowinstance",
                          "change_reviewitem", "decide_reviewitem", "change_breakerstate",
                          "delete_llmcacheentry"] + _NOTIFY,
}


def ensure_roles() -> dict[str, Group]:
    groups = {}
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                         codename__in=codenames))
        groups[name] = group
    return groups
