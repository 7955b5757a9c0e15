"""Who may do what: the one permission check behind every page, JSON endpoint, socket and admin view.

The roles are groups holding the `workflows` permissions (workflows/roles.py): viewers read graphs,
instances and the review queue; designers also build, save and start workflows (and cancel the instances
they started); operators also start, cancel, retry, rerun and decide. Superusers hold every permission
and may answer any human task whatever its `assignee_group`.

How to guard something new (tests/security/test_permissions.py fails for a URL it has no row for):

- a page: `@authorize(VIEW_INSTANCES)`: a login redirect for the anonymous, then a 403 page that names
  the missing permission and the groups holding it;
- a JSON endpoint: `@api_view(("GET",), perm=VIEW_INSTANCES)` (dashboard/api/http.py): the same check, 401/403
  as JSON;
- a socket or anything else: `refusal(user, *perms)`, the message to send or None when allowed;
- an admin action: `@admin.action(permissions=[...])` (workflows/admin.py shows the pattern);
- answering a review item: `workflows.operators.review.refusal(user, item)` (the decide permission plus the item's
  assignee group), which `workflows.operators.review.decide` enforces for every caller.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from workflows.roles import ROLES

# The viewer role's permissions that the pages and APIs check.
VIEW_GRAPHS = "workflows.view_workflowdefinition"  # workflows, versions, the editor, diffs, node types
VIEW_INSTANCES = "workflows.view_workflowinstance"  # instances, their steps and events, the dashboard
VIEW_REVIEWS = "workflows.view_reviewitem"  # the review queue
# What the other roles add.
CREATE_WORKFLOW = "workflows.add_workflowdefinition"
CHANGE_WORKFLOW = "workflows.change_workflowdefinition"
SAVE_VERSION = "workflows.add_workflowversion"
START = "workflows.add_workflowinstance"
OPERATE = "workflows.operate_workflowinstance"
DECIDE = "workflows.decide_reviewitem"
RESET_BREAKER = "workflows.change_breakerstate"


def groups_with(perm: str) -> list[str]:
    """The role groups that hold a permission ("workflows.view_workflowinstance" -> viewers, ...)."""
    codename = perm.split(".", 1)[-1]
    return [role for role, codenames in ROLES.items() if codename in codenames]


def describe(perm: str) -> str:
    groups = groups_with(perm)
    return f"{perm} (the {' or '.join(groups)} group)" if groups else f"{perm} (superusers)"


def refusal(user: Any, *perms: str) -> str | None:
    """Why `user` may not do what needs all of `perms`, or None when they may. Touches the database
    (the permission cache): call it through database_sync_to_async from async code."""
    if user is None or not user.is_authenticated:
        return "authentication required"
    missing = [perm for perm in perms if not user.has_perm(perm)]
    if not missing:
        return None
    return "permission denied: you need " + ", ".join(describe(perm) for perm in missing)


View = Callable[..., HttpResponse]


def authorize(*perms: str) -> Callable[[View], View]:
    """A page for logged-in users holding all of `perms`: others are sent to log in, or get the 403
    page (templates/403.html) with the refusal."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            message = refusal(request.user, *perms)
            if message is not None:
                raise PermissionDenied(message)
            return view(request, *args, **kwargs)

        return login_required(wrapper)

    return decorator
