"""Who can do what: a matrix of role × endpoint × action, built from the URL conf, the admin's registry and
the WebSocket routes, so a new URL, admin action or socket without a row here fails
`test_every_url_has_a_row`. Then the findings one by one: a human task's `assignee_group` is enforced on
every path that answers it, view-only staff cannot reset breakers, the pages offer nothing a user may not
use (the Admin link, the Edit button, the review form).

Roles: anonymous; `nobody` (logged in, no group); viewer, designer, operator (in `operators` and
`finance`), outsider (in `operators` only: an operator outside the human task's `finance` group) and a
superuser. The role users are staff, so the admin is reached and their permissions decide; `nobody` is not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from dashboard.routing import websocket_urlpatterns
from tests.support.shared_rows import built_once
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import BreakerState, Credential, LLMCacheEntry, ReviewItem, WorkflowInstance
from workflows.operators import review
from workflows.roles import ensure_roles
from workflows.triggers import action_links

ROLES = ("anonymous", "nobody", "viewer", "designer", "operator", "outsider", "superuser")
SLUG = "payments"
GRAPH = {
    "nodes": [{"id": "start", "type": "start"},
              {"id": "ask", "type": "human", "config": {"prompt": "Pay?", "assignee_group": "finance"}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}
ROUTED = {"graph": {"nodes": [{"id": "start", "type": "start"},
                               {"id": "pick", "type": "router", "config": {"rules": [], "default": "on"}},
                               {"id": "end", "type": "end"}],
                     "edges": [{"source": "start", "target": "pick"}, {"source": "pick", "target": "end"}]},
          "sample": {"context": {"n": 1}}}
HALTING = {
    "nodes": [{"id": "start", "type": "start"}, {"id": "nap", "type": "wait", "config": {"seconds": 60}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "nap"}, {"source": "nap", "target": "end"}],
    "settings": {"ttl_s": 60},
}


def users(db: None) -> dict[str, User | None]:  # also tests/security/test_socket_permissions.py
    groups = ensure_roles()
    finance = Group.objects.get_or_create(name="finance")[0]  # no permissions: membership only

    def make(name: str, *in_groups: Group) -> User:
        user = User.objects.create_user(name, is_staff=True)  # no password: no hashing
        user.groups.add(*in_groups)
        return User.objects.get(pk=user.pk)

    return {
        "anonymous": None,
        "nobody": User.objects.create_user("nobody"),
        "viewer": make("viewer", groups["viewers"]),
        "designer": make("designer", groups["designers"]),
        "operator": make("operator", groups["operators"], finance),
        "outsider": make("outsider", groups["operators"]),
        "superuser": User.objects.create_superuser("root", password=None),
    }


@dataclass
class World:
    """What every cell acts on: the same rows for every test of this module (built once), read afresh."""

    users: dict[str, User | None]
    task: WorkflowInstance  # waiting on a human task for `finance`, started by the superuser
    mine: WorkflowInstance  # the same, started by the designer
    halted: WorkflowInstance  # halted by its TTL: an open review item with no assignee group
    breaker: BreakerState
    ids: dict[str, int] = field(default_factory=dict)

    def client(self, role: str) -> Client:
        client = Client()
        user = self.users[role]
        if user is not None:
            client.force_login(user)
        return client


@dataclass(frozen=True)
class WorldRows:
    """The primary keys of the world's rows."""

    users: dict[str, int | None]
    task: int
    mine: int
    halted: int
    breaker: int
    ids: dict[str, int]


def build_world() -> WorldRows:
    people = users(None)
    version = save_version(SLUG, GRAPH)
    task = runtime.start_instance(version, {}, user=people["superuser"])
    mine = runtime.start_instance(version, {}, user=people["designer"])
    halted = runtime.start_instance(save_version("halting", HALTING), {})
    assert runtime.expire_instance(halted.pk, timezone.now() + timedelta(hours=1))
    breaker = BreakerState.objects.create(key="llm:demo", state="open", opened_at=timezone.now().timestamp())
    credential = Credential(name="crm_token", kind="secret")
    credential.set_value("s3cret-value")
    credential.save()
    cached = LLMCacheEntry.objects.create(workflow_id=version.definition_id, key="k", output={"text": "hi"},
                                          expires_at=timezone.now() + timedelta(hours=1))
    from dashboard.security import tokens

    viewer_token = tokens.issue(people["viewer"], "viewer's", ["read"]).token
    return WorldRows({role: user.pk if user is not None else None for role, user in people.items()},
                     task.pk, mine.pk, halted.pk, breaker.pk, ids={
        "token": viewer_token.pk,
        "task_item": ReviewItem.objects.get(instance=task, status="open").pk,
        "halt_item": ReviewItem.objects.get(instance=halted, status="open").pk,
        "cache_entry": cached.pk,
    })


@pytest.fixture(scope="module")
def world_rows(django_db_setup: None, django_db_blocker: Any) -> Iterator[WorldRows]:
    """Built once for the module, in a transaction rolled back at its end; each test runs in a savepoint
    inside it, rolled back after the test (tests/support/shared_rows.py). Building it for each of the ~940
    cells took most of this module's time."""
    yield from built_once(django_db_blocker, build_world)


@pytest.fixture
def world(db: None, world_rows: WorldRows) -> World:
    """The world's rows as this test starts (as built: the previous test's changes were rolled back), as
    fresh objects: no permission cache or changed field carries over from another test."""
    found = User.objects.in_bulk([pk for pk in world_rows.users.values() if pk is not None])
    people = {role: found[pk] if pk is not None else None for role, pk in world_rows.users.items()}
    instances = WorkflowInstance.objects.in_bulk([world_rows.task, world_rows.mine, world_rows.halted])
    return World(people, instances[world_rows.task], instances[world_rows.mine], instances[world_rows.halted],
                 BreakerState.objects.get(pk=world_rows.breaker), ids=dict(world_rows.ids))


# --- The matrix ---------------------------------------------------------------------------------

def row(anonymous: int, nobody: int, viewer: int, designer: int, operator: int, outsider: int,
        superuser: int) -> dict[str, int]:
    return dict(zip(ROLES, (anonymous, nobody, viewer, designer, operator, outsider, superuser), strict=True))


PUBLIC = row(200, 200, 200, 200, 200, 200, 200)
VIEW_PAGE = row(302, 403, 200, 200, 200, 200, 200)  # the viewer role or better; the anonymous log in first
VIEW_API = row(401, 403, 200, 200, 200, 200, 200)
DESIGN_PAGE = row(302, 403, 403, 302, 403, 403, 302)  # designers' forms redirect when done
CREDENTIALS_PAGE = row(302, 403, 403, 200, 403, 403, 200)  # designers manage credentials; no one else sees them
# /metrics is for scrapers, not people: a bearer token or an address allow-list (docs/operating.md, Observability); with
# neither configured and DEBUG off (the tests' settings) it refuses everyone, logged in or not.
METRICS = row(403, 403, 403, 403, 403, 403, 403)
DESIGN_API = row(401, 403, 403, 201, 403, 403, 201)
START_API = row(401, 403, 403, 201, 201, 201, 201)
OPERATE_API = row(401, 403, 403, 403, 409, 409, 409)  # 409: allowed, but the instance is waiting
ANSWER_API = row(401, 403, 403, 403, 200, 403, 200)  # the finance task: operators in finance, superusers
ANSWER_PAGE = row(302, 403, 403, 403, 302, 403, 302)


@dataclass
class Action:
    method: str
    path: Callable[[World], str]
    expected: dict[str, int]
    body: dict[str, Any] | None = None
    json: bool = False  # send the body as JSON (the API) rather than a form


def api(method: str, path: Callable[[World], str], expected: dict[str, int], body: Any = None) -> Action:
    return Action(method, path, expected, body, json=True)


DESIGN_CHANGE_API = row(401, 403, 403, 200, 403, 403, 200)  # a designer's change to a workflow's triggers
DESIGN_DELETE_API = row(401, 403, 403, 204, 403, 403, 204)


def _schedule_id(world: World) -> int:
    from workflows.triggers.models import Schedule

    return int(Schedule.objects.create(definition=world.task.version.definition, cron="0 9 * * *").pk)


def _hook_id(world: World) -> str:
    from workflows.triggers.models import Webhook

    return str(Webhook.objects.create(definition=world.task.version.definition).hook_id)


def _webhook_path(world: World) -> str:
    from workflows.triggers.models import Webhook

    hook = Webhook.objects.create(definition=world.task.version.definition)
    return f"/hooks/{SLUG}/{hook.hook_id}"

# Planning with the scripted provider: its reply is the (valid) graph above; nothing is saved.
PLAN_API = row(401, 403, 403, 200, 403, 403, 200)  # designers (a plan saves nothing: 200)
PLAN_BODY = {"objective": "pay", "provider": "scripted", "script": [{"text": json.dumps(GRAPH)}]}


# Every named URL of dashboard/urls.py (the admin has its own matrix below): the actions and who gets what.
MATRIX: dict[str, list[Action]] = {
    "home": [Action("GET", lambda w: "/", VIEW_PAGE)],
    "healthz": [Action("GET", lambda w: "/healthz", PUBLIC)],
    "workflow-list": [Action("GET", lambda w: "/workflows/", VIEW_PAGE),
                      Action("POST", lambda w: "/workflows/", DESIGN_PAGE, {"name": "New one"})],
    "definition": [Action("GET", lambda w: f"/workflows/{SLUG}/", VIEW_PAGE)],
    "workflow-editor": [Action("GET", lambda w: f"/workflows/{SLUG}/edit/", VIEW_PAGE)],
    "workflow-duplicate": [Action("POST", lambda w: f"/workflows/{SLUG}/duplicate", DESIGN_PAGE)],
    "workflow-archive": [Action("POST", lambda w: f"/workflows/{SLUG}/archive", DESIGN_PAGE)],
    "workflow-triggers": [Action("GET", lambda w: f"/workflows/{SLUG}/triggers/", VIEW_PAGE),
                          Action("POST", lambda w: f"/workflows/{SLUG}/triggers/", DESIGN_PAGE,
                                 {"action": "add_schedule", "cron": "0 * * * *", "timezone": "UTC"})],
    # Exempt from login and roles: public, authenticated by its HMAC signature instead (an unsigned
    # request is refused whoever sends it; tests/triggers/test_webhooks.py covers the signatures).
    "webhook-receive": [api("POST", _webhook_path, row(401, 401, 401, 401, 401, 401, 401), {"x": 1})],
    "instance-list": [Action("GET", lambda w: "/instances/", VIEW_PAGE)],
    "instance": [Action("GET", lambda w: f"/instances/{w.task.pk}/", VIEW_PAGE)],
    "instance-report": [Action("GET", lambda w: f"/instances/{w.halted.pk}/report/", VIEW_PAGE)],
    "api-node-types": [api("GET", lambda w: "/api/node-types", VIEW_API)],
    "api-meta": [api("GET", lambda w: "/api/meta", VIEW_API)],
    "api-functions": [api("GET", lambda w: "/api/functions", VIEW_API)],
    "credential-list": [Action("GET", lambda w: "/credentials/", CREDENTIALS_PAGE),
                        Action("POST", lambda w: "/credentials/", DESIGN_PAGE,
                               {"name": "new_token", "kind": "secret", "value": "v"})],
    "credential-edit": [Action("GET", lambda w: "/credentials/crm_token/", CREDENTIALS_PAGE),
                        Action("POST", lambda w: "/credentials/crm_token/", DESIGN_PAGE,
                               {"name": "crm_token", "kind": "secret", "value": "replaced"})],
    "credential-delete": [Action("POST", lambda w: "/credentials/crm_token/delete", DESIGN_PAGE)],
    "metrics": [Action("GET", lambda w: "/metrics", METRICS)],
    "api-validate": [api("POST", lambda w: "/api/validate", VIEW_API, {"graph": GRAPH})],
    "api-start": [api("POST", lambda w: f"/api/workflows/{SLUG}/instances", START_API, {"input": {}})],
    "api-start-many": [api("POST", lambda w: f"/api/workflows/{SLUG}/instances/bulk", START_API,
                           {"inputs": [{}, {}]})],
    "api-editor-versions": [api("GET", lambda w: f"/api/workflows/{SLUG}/versions", VIEW_API),
                            api("POST", lambda w: f"/api/workflows/{SLUG}/versions", DESIGN_API,
                                {"graph": GRAPH, "message": "again", "base_version": 1})],
    "api-editor-version": [api("GET", lambda w: f"/api/workflows/{SLUG}/versions/1", VIEW_API)],
    "api-editor-restore": [api("POST", lambda w: f"/api/workflows/{SLUG}/versions/1/restore", DESIGN_API)],
    "api-editor-diff": [api("GET", lambda w: f"/api/workflows/{SLUG}/diff?from=1&to=1", VIEW_API)],
    # Testing a node runs its handler (an http node calls out): designers only; nothing is stored.
    "api-editor-test-node": [api("POST", lambda w: f"/api/workflows/{SLUG}/nodes/pick/test",
                                 row(401, 403, 403, 200, 403, 403, 200), ROUTED)],
    "api-editor-plan": [api("POST", lambda w: f"/api/workflows/{SLUG}/plan", PLAN_API, PLAN_BODY)],
    "api-check-expression": [api("POST", lambda w: "/api/expressions/check", VIEW_API,
                                 {"expression": "context.n > 1"})],
    "api-instance": [api("GET", lambda w: f"/api/instances/{w.task.pk}", VIEW_API)],
    "api-instance-events": [api("GET", lambda w: f"/api/instances/{w.task.pk}/events", VIEW_API)],
    "api-instance-steps": [api("GET", lambda w: f"/api/instances/{w.task.pk}/steps", VIEW_API)],
    "api-instance-report": [api("GET", lambda w: f"/api/instances/{w.halted.pk}/report", VIEW_API),
                            api("GET", lambda w: f"/api/instances/{w.task.pk}/report?download=1", VIEW_API)],
    "api-instance-cancel": [
        # Designers cancel the instances they started, operators any instance.
        api("POST", lambda w: f"/api/instances/{w.mine.pk}/cancel", row(401, 403, 403, 200, 200, 200, 200)),
        api("POST", lambda w: f"/api/instances/{w.task.pk}/cancel", row(401, 403, 403, 403, 200, 200, 200)),
    ],
    "api-instance-retry": [api("POST", lambda w: f"/api/instances/{w.task.pk}/retry", OPERATE_API)],
    "api-instance-rerun": [api("POST", lambda w: f"/api/instances/{w.task.pk}/rerun", OPERATE_API,
                               {"node": "ask"})],
    "api-instance-review": [
        api("POST", lambda w: f"/api/instances/{w.task.pk}/review", ANSWER_API, {"action": "approve"}),
        # A halt has no assignee group: any operator decides it.
        api("POST", lambda w: f"/api/instances/{w.halted.pk}/review", row(401, 403, 403, 403, 200, 200, 200),
            {"action": "cancel"}),
    ],
    "api-dashboard": [api("GET", lambda w: "/api/dashboard", VIEW_API)],
    "api-dashboard-daily": [api("GET", lambda w: "/api/dashboard/daily?days=7", VIEW_API)],
    "review-list": [Action("GET", lambda w: "/review/", VIEW_PAGE)],
    "review-detail": [Action("GET", lambda w: f"/review/{w.ids['task_item']}/", VIEW_PAGE),
                      Action("POST", lambda w: f"/review/{w.ids['task_item']}/", ANSWER_PAGE,
                             {"action": "approve"})],
    # The next open item: a redirect to it (or to the inbox when none is left).
    "review-next": [Action("GET", lambda w: f"/review/next/?after={w.ids['task_item']}",
                           row(302, 403, 302, 302, 302, 302, 302))],
    "api-reviews": [api("GET", lambda w: "/api/reviews?reason=human_task", VIEW_API)],
    # A notice's signed link: a confirm page for whoever may see the item (the decision is its POST,
    # with the inbox's rules: tests/triggers/test_action_links.py).
    "review-action": [Action("GET", lambda w: action_links.path_for(w.ids["halt_item"], "approve"), VIEW_PAGE)],
    # The MCP tool picker reaches out with a server's token: designers only.
    "api-mcp-servers": [api("GET", lambda w: "/api/mcp/servers", row(401, 403, 403, 200, 403, 403, 200))],
    "api-mcp-tools": [api("GET", lambda w: "/api/mcp/servers/nope/tools", row(401, 403, 403, 404, 403, 403, 404))],
    # Evaluations: everyone who sees graphs reads them; designers import datasets and evaluate.
    "evaluations": [Action("GET", lambda w: f"/workflows/{SLUG}/evaluations/", VIEW_PAGE),
                    Action("POST", lambda w: f"/workflows/{SLUG}/evaluations/", DESIGN_PAGE,
                           {"form": "dataset", "name": "ds", "jsonl": '{"input": {}}'})],
    "evaluation": [Action("GET", lambda w: "/evaluations/999999/", row(302, 403, 404, 404, 404, 404, 404))],
    "api-datasets": [api("GET", lambda w: f"/api/workflows/{SLUG}/datasets", VIEW_API),
                     api("POST", lambda w: f"/api/workflows/{SLUG}/datasets", DESIGN_API,
                         {"name": "ds", "jsonl": '{"input": {}}'})],
    "api-dataset-export": [api("GET", lambda w: f"/api/workflows/{SLUG}/datasets/none",
                               row(401, 403, 404, 404, 404, 404, 404))],
    "api-evaluations": [api("GET", lambda w: f"/api/workflows/{SLUG}/evaluations", VIEW_API),
                        api("POST", lambda w: f"/api/workflows/{SLUG}/evaluations",
                            row(401, 403, 403, 400, 403, 403, 400), {"dataset": "none"})],
    "api-evaluation": [api("GET", lambda w: "/api/evaluations/999999", row(401, 403, 404, 404, 404, 404, 404))],
    "api-evaluation-compare": [api("GET", lambda w: "/api/evaluations/999999/compare/999998",
                                   row(401, 403, 404, 404, 404, 404, 404))],
    # The inbox's bulk decision: deciders only (each item's own checks then apply, as on its page).
    "api-reviews-decide": [api("POST", lambda w: "/api/reviews/decide", row(401, 403, 403, 403, 200, 200, 200),
                               {"items": [0], "action": "reject"})],
    "login": [Action("GET", lambda w: "/accounts/login/", PUBLIC)],
    "logout": [Action("POST", lambda w: "/accounts/logout/", row(302, 302, 302, 302, 302, 302, 302))],
    "api-not-found": [api("GET", lambda w: "/api/nothing/here", row(404, 404, 404, 404, 404, 404, 404))],
    "api-docs": [Action("GET", lambda w: "/api/docs", row(302, 302, 302, 302, 302, 302, 302))],
    # Everyone logged in manages their own tokens (what a token may do is bounded by its user).
    "api-tokens": [Action("GET", lambda w: "/account/tokens/", row(302, 200, 200, 200, 200, 200, 200)),
                   # Made and shown in this answer (no-store, never kept in the session); `nobody` holds no
                   # scope, so the form is shown again.
                   Action("POST", lambda w: "/account/tokens/", row(302, 200, 200, 200, 200, 200, 200),
                          {"name": "t", "scopes": ["read"]})],
    "api-token-revoke": [Action("POST", lambda w: f"/account/tokens/{w.ids['token']}/revoke",
                                row(302, 404, 302, 404, 404, 404, 404))],  # the viewer's token
}

# The v1 API (dashboard/api/v1/, namespace "v1"): every URL name of its URL conf, by session and by token.
V1 = "/api/v1/"
V1_MATRIX: dict[str, list[Action]] = {
    "openapi-json": [api("GET", lambda w: V1 + "openapi.json", row(401, 200, 200, 200, 200, 200, 200))],
    "openapi-view": [api("GET", lambda w: V1 + "docs", row(302, 200, 200, 200, 200, 200, 200))],
    "start": [api("POST", lambda w: V1 + f"workflows/{SLUG}/instances", START_API, {"input": {}})],
    "start_many": [api("POST", lambda w: V1 + f"workflows/{SLUG}/instances/bulk", START_API, {"inputs": [{}]})],
    "get": [api("GET", lambda w: V1 + f"instances/{w.task.pk}", VIEW_API)],
    "report": [api("GET", lambda w: V1 + f"instances/{w.task.pk}/report", VIEW_API)],
    "list_instances": [api("GET", lambda w: V1 + "instances", VIEW_API)],
    "events": [api("GET", lambda w: V1 + f"instances/{w.task.pk}/events", VIEW_API)],
    "event_stream": [api("GET", lambda w: V1 + f"instances/{w.task.pk}/events/stream", VIEW_API)],
    "cancel": [api("POST", lambda w: V1 + f"instances/{w.mine.pk}/cancel", row(401, 403, 403, 200, 200, 200, 200)),
               api("POST", lambda w: V1 + f"instances/{w.task.pk}/cancel", row(401, 403, 403, 403, 200, 200, 200))],
    "retry": [api("POST", lambda w: V1 + f"instances/{w.task.pk}/retry", OPERATE_API)],
    "rerun": [api("POST", lambda w: V1 + f"instances/{w.task.pk}/rerun", OPERATE_API, {"node": "ask"})],
    "list_workflows": [api("GET", lambda w: V1 + "workflows", VIEW_API)],
    "get_workflow": [api("GET", lambda w: V1 + f"workflows/{SLUG}", VIEW_API)],
    "export_graph": [api("GET", lambda w: V1 + f"workflows/{SLUG}/graph", VIEW_API)],
    "validate": [api("POST", lambda w: V1 + "validate", VIEW_API, {"graph": GRAPH})],
    "save": [api("POST", lambda w: V1 + f"workflows/{SLUG}/versions", DESIGN_API,
                 {"graph": GRAPH, "message": "again", "base_version": 1})],
    "diff": [api("GET", lambda w: V1 + f"workflows/{SLUG}/diff?from=1&to=1", VIEW_API)],
    "plan": [api("POST", lambda w: V1 + f"workflows/{SLUG}/plan", PLAN_API, PLAN_BODY)],
    "test_node": [api("POST", lambda w: V1 + f"workflows/{SLUG}/nodes/pick/test",
                      row(401, 403, 403, 200, 403, 403, 200), ROUTED)],
    "list_reviews": [api("GET", lambda w: V1 + "reviews", VIEW_API)],
    "get_review": [api("GET", lambda w: V1 + f"reviews/{w.ids['task_item']}", VIEW_API)],
    "decide": [api("POST", lambda w: V1 + f"reviews/{w.ids['task_item']}/decide", ANSWER_API, {"action": "approve"}),
               api("POST", lambda w: V1 + f"reviews/{w.ids['halt_item']}/decide",
                   row(401, 403, 403, 403, 200, 200, 200), {"action": "cancel"})],
    "list_breakers": [api("GET", lambda w: V1 + "breakers", VIEW_API)],
    "reset_breaker": [api("POST", lambda w: V1 + "breakers/llm:demo/reset", row(401, 403, 403, 403, 200, 200, 200))],
    "health": [api("GET", lambda w: V1 + "health", PUBLIC)],
    "list_schedules": [api("GET", lambda w: V1 + f"workflows/{SLUG}/schedules", VIEW_API)],
    "create_schedule": [api("POST", lambda w: V1 + f"workflows/{SLUG}/schedules", DESIGN_API, {"cron": "0 9 * * *"})],
    "update_schedule": [api("PATCH", lambda w: V1 + f"workflows/{SLUG}/schedules/{_schedule_id(w)}", DESIGN_CHANGE_API,
                            {"enabled": False})],
    "delete_schedule": [api("DELETE", lambda w: V1 + f"workflows/{SLUG}/schedules/{_schedule_id(w)}",
                            DESIGN_DELETE_API)],
    "list_webhooks": [api("GET", lambda w: V1 + f"workflows/{SLUG}/webhooks", VIEW_API)],
    "create_webhook": [api("POST", lambda w: V1 + f"workflows/{SLUG}/webhooks", DESIGN_API, {"name": "crm"})],
    "update_webhook": [api("PATCH", lambda w: V1 + f"workflows/{SLUG}/webhooks/{_hook_id(w)}", DESIGN_CHANGE_API,
                           {"enabled": False})],
    "delete_webhook": [api("DELETE", lambda w: V1 + f"workflows/{SLUG}/webhooks/{_hook_id(w)}", DESIGN_DELETE_API)],
    "rotate_webhook": [api("POST", lambda w: V1 + f"workflows/{SLUG}/webhooks/{_hook_id(w)}/rotate",
                           DESIGN_CHANGE_API)],
    "api-root": [api("GET", lambda w: V1, row(404, 404, 404, 404, 404, 404, 404))],
    "not-found": [api("GET", lambda w: V1 + "nothing/here", row(404, 404, 404, 404, 404, 404, 404))],
}


def _named_urls() -> tuple[set[str], set[str]]:
    """The names of dashboard/urls.py's patterns and the namespaces of the URL confs it includes."""
    names, namespaces = set(), set()
    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            namespaces.add(entry.namespace or str(entry.pattern))
        elif isinstance(entry, URLPattern):
            if str(entry.pattern).startswith("^static/"):
                continue  # staticfiles_urlpatterns (DEBUG only): files, no permissions
            names.add(entry.name or str(entry.pattern))
    return names, namespaces


def _v1_names() -> set[str]:
    resolver = next(entry for entry in get_resolver().url_patterns
                    if isinstance(entry, URLResolver) and entry.namespace == "v1")
    return {entry.name or str(entry.pattern) for entry in resolver.url_patterns}


def test_every_url_has_a_row() -> None:
    names, namespaces = _named_urls()
    assert names == set(MATRIX), "add a row to MATRIX for each new URL (and remove rows of URLs that went)"
    assert namespaces == {"admin", "v1"}, "a new included URL conf needs its own matrix, as the admin has"
    assert _v1_names() == set(V1_MATRIX), "add a row to V1_MATRIX for each new v1 endpoint"
    routes = {str(entry.pattern) for entry in websocket_urlpatterns}
    assert routes == set(SOCKETS), "add a row to SOCKETS for each new WebSocket route"


CELLS = [(name, index, role) for name, actions in MATRIX.items() for index in range(len(actions)) for role in ROLES]


@pytest.mark.parametrize(("name", "index", "role"), CELLS, ids=[f"{n}-{i}-{r}" for n, i, r in CELLS])
def test_matrix(world: World, name: str, index: int, role: str) -> None:
    action = MATRIX[name][index]
    client = world.client(role)
    path = action.path(world)
    if action.method == "GET":
        response = client.get(path)
    elif action.json:
        response = client.post(path, action.body or {}, content_type="application/json")
    else:
        response = client.post(path, action.body or {})
    expected = action.expected[role]
    assert response.status_code == expected, f"{role} {action.method} {path}: {response.content[:300]!r}"
    if expected == 302 and role == "anonymous" and name != "api-docs":  # api-docs: a redirect to /api/v1/docs
        assert response["Location"].startswith("/accounts/login/")
    if expected == 403 and action.json:
        assert response.json()["message"].startswith("permission denied")


# By session and by token, for each role with a user: the anonymous have no user to issue a token to, so their
# "token" cell sent the very same request as their "session" cell (no credentials at all; test_v1_matrix
# falls back to world.client("anonymous") for both). It is not run twice. `nobody` may hold no scope, so no
# token either (its session cell checks it).
V1_CELLS = [(name, index, role, auth) for name, actions in V1_MATRIX.items() for index in range(len(actions))
            for role in ROLES for auth in ("session", "token")
            if not (auth == "token" and role in ("anonymous", "nobody"))]


@pytest.mark.parametrize(("name", "index", "role", "auth"), V1_CELLS,
                         ids=[f"v1-{n}-{i}-{r}-{a}" for n, i, r, a in V1_CELLS])
def test_v1_matrix(world: World, name: str, index: int, role: str, auth: str, redis_conn: Any) -> None:
    """The same answer by session and by a token holding every scope its user may have (`nobody` may have
    none, so no token): the token adds nothing to its user's permissions."""
    from dashboard.security import tokens

    action = V1_MATRIX[name][index]
    user = world.users[role]
    if auth == "token":
        assert user is not None
        client = Client(HTTP_AUTHORIZATION="Bearer " + tokens.issue(user, "m", tokens.scopes_for(user)).plaintext)
    else:
        client = world.client(role)
    path = action.path(world)
    if action.method == "GET":
        response = client.get(path)
    else:
        response = client.generic(action.method, path, json.dumps(action.body or {}), content_type="application/json")
    expected = action.expected[role]
    if name == "openapi-view" and role == "anonymous":
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
        return
    assert response.status_code == expected, f"{role} by {auth} {action.method} {path}: {response.content[:300]!r}"
    if expected >= 400:
        assert response["Content-Type"] == "application/problem+json"
        if expected == 403:
            assert response.json()["detail"].startswith("permission denied"), response.json()


# --- The admin: its pages, its custom view and every action -------------------------------------

ADMIN_STAFF = row(302, 302, 200, 200, 200, 200, 200)  # non-staff (and the anonymous) go to the admin login


def test_the_admin_index_is_for_staff(world: World) -> None:
    for role in ROLES:
        assert world.client(role).get("/admin/").status_code == ADMIN_STAFF[role], role


@dataclass
class AdminAction:
    """One admin action: who may run it, on what, and how to tell it ran."""

    allowed: set[str]
    selected: Callable[[World], list[int]]
    ran: Callable[[World, list[str]], bool]


DECIDERS = {"operator", "outsider", "superuser"}


def _halt_decided(world: World, messages: list[str]) -> bool:
    return not ReviewItem.objects.filter(pk=world.ids["halt_item"], status="open").exists()


ADMIN_ACTIONS: dict[tuple[str, str], AdminAction] = {
    ("reviewitem", "approve_selected"): AdminAction(DECIDERS, lambda w: [w.ids["halt_item"]], _halt_decided),
    ("reviewitem", "reject_selected"): AdminAction(DECIDERS, lambda w: [w.ids["halt_item"]], _halt_decided),
    ("reviewitem", "resume_circuit_halts"): AdminAction(
        DECIDERS, lambda w: [w.ids["halt_item"]], lambda w, messages: any("resumed" in m for m in messages)),
    ("breakerstate", "reset_selected"): AdminAction(
        {"operator", "outsider", "superuser"}, lambda w: [w.breaker.pk],
        lambda w, messages: BreakerState.objects.get(pk=w.breaker.pk).state == "closed"),
    # Operators clear cached llm replies (delete permission); viewers and designers only see them.
    ("llmcacheentry", "clear_workflows"): AdminAction(
        {"operator", "outsider", "superuser"}, lambda w: [w.ids["cache_entry"]],
        lambda w, messages: not LLMCacheEntry.objects.filter(pk=w.ids["cache_entry"]).exists()),
    # Admins list and revoke anyone's tokens (dashboard/admin.py: the change permission is superusers').
    ("apitoken", "revoke_tokens"): AdminAction(
        {"superuser"}, lambda w: [w.ids["token"]],
        lambda w, messages: any("1 token(s) revoked" in m for m in messages)),
}


def _our_model_admins() -> list[tuple[Any, admin.ModelAdmin[Any]]]:
    return [(model, admin.site.get_model_admin(model)) for model in apps.get_models()
            if model._meta.app_label in ("workflows", "dashboard") and admin.site.is_registered(model)]


def test_every_admin_action_carries_its_permissions(rf: Any, world: World) -> None:
    """Each action of our ModelAdmins (and the site's delete_selected) names the permissions it needs, and
    every action we wrote has a row in ADMIN_ACTIONS."""
    ours = set()
    for model, model_admin in _our_model_admins():
        request = rf.get("/admin/")
        request.user = world.users["superuser"]
        for name, (func, _, _) in model_admin.get_actions(request).items():
            assert getattr(func, "allowed_permissions", None), f"{model.__name__} action {name} has no permissions"
            if name != "delete_selected":
                ours.add((model._meta.model_name, name))
    assert ours == set(ADMIN_ACTIONS)


ACTION_CELLS = [(key, role) for key in ADMIN_ACTIONS for role in ROLES if role != "anonymous"]


@pytest.mark.parametrize(("key", "role"), ACTION_CELLS, ids=[f"{k[0]}.{k[1]}-{r}" for k, r in ACTION_CELLS])
def test_admin_action_matrix(world: World, key: tuple[str, str], role: str) -> None:
    model, action = key
    spec = ADMIN_ACTIONS[key]
    app = next(m._meta.app_label for m in apps.get_models() if m._meta.model_name == model)
    url = reverse(f"admin:{app}_{model}_changelist")
    # "post": the confirmed step of an action that asks first (reject_selected).
    response = world.client(role).post(url, {"action": action, "_selected_action": spec.selected(world),
                                             "post": "yes"}, follow=True)
    messages = [str(m) for m in response.context["messages"]] if response.context else []
    assert spec.ran(world, messages) == (role in spec.allowed), f"{role}: {messages}"
    if role == "nobody":
        assert response.redirect_chain[0][0].startswith("/admin/login/")


def test_view_only_staff_cannot_reset_a_breaker(world: World) -> None:
    """The finding: a viewer with staff status reset breakers from the admin. Not offered, not run."""
    viewer = world.client("viewer")
    url = reverse("admin:workflows_breakerstate_changelist")
    assert b"reset_selected" not in viewer.get(url).content
    viewer.post(url, {"action": "reset_selected", "_selected_action": [world.breaker.pk]})
    assert BreakerState.objects.get(pk=world.breaker.pk).state == "open"
    assert b"reset_selected" in world.client("operator").get(url).content


# The custom admin view: who is shown the decision form for the finance task.
DECIDE_VIEW = row(302, 302, 302, 302, 200, 302, 200)


def test_the_admin_decide_view_matrix(world: World) -> None:
    url = reverse("admin:workflows_reviewitem_decide", args=[world.ids["task_item"]])
    for role in ROLES:
        assert world.client(role).get(url).status_code == DECIDE_VIEW[role], role


# --- WebSockets ---------------------------------------------------------------------------------

SOCKETS: dict[str, Callable[[WorkflowInstance], str]] = {
    "ws/instances/<int:instance_id>/": lambda instance: f"/ws/instances/{instance.pk}/",
    "ws/dashboard/": lambda instance: "/ws/dashboard/",
}
# The socket matrix itself (who is refused, who gets a hello) is tests/security/test_socket_permissions.py:
# a transactional test, so it cannot share this module's rows (tests/support/shared_rows.py).


# --- A human task's assignee group, on every path that answers it ---------------------------------

def _task_open(world: World) -> bool:
    return ReviewItem.objects.get(pk=world.ids["task_item"]).is_open


def test_the_shared_decision_code_refuses_an_operator_outside_the_group(world: World) -> None:
    item = ReviewItem.objects.get(pk=world.ids["task_item"])
    assert item.assignee_group == "finance"
    with pytest.raises(review.ReviewForbidden, match="group 'finance'"):
        review.decide(item.pk, world.users["outsider"], review.Decision(action="approve"))
    assert _task_open(world)
    review.decide(item.pk, world.users["operator"], review.Decision(action="approve"))
    assert not _task_open(world)


def test_superusers_answer_any_task(world: World) -> None:
    review.decide(world.ids["task_item"], world.users["superuser"], review.Decision(action="reject"))
    assert not _task_open(world)


def test_the_api_refuses_with_a_403_naming_the_group(world: World) -> None:
    url = f"/api/instances/{world.task.pk}/review"
    for action in ("approve", "reject", "cancel"):
        response = world.client("outsider").post(url, {"action": action}, content_type="application/json")
        assert response.status_code == 403
        assert response.json() == {"message": "permission denied: only members of the group 'finance' may answer "
                                              "this task"}
    assert _task_open(world)
    response = world.client("operator").post(url, {"action": "approve"}, content_type="application/json")
    assert response.status_code == 200 and not _task_open(world)


def test_the_review_page_offers_no_form_and_refuses_the_post(world: World) -> None:
    url = f"/review/{world.ids['task_item']}/"
    outsider = world.client("outsider")
    page = outsider.get(url).content.decode()
    assert 'class="decision"' not in page and "Apply decision" not in page
    assert "only members of the group &#x27;finance&#x27; may answer this task" in page
    refused = outsider.post(url, {"action": "approve"})
    assert refused.status_code == 403 and "group &#x27;finance&#x27;" in refused.content.decode()
    assert _task_open(world)
    assert "Apply decision" in world.client("operator").get(url).content.decode()


def test_the_admin_decide_view_and_bulk_actions_refuse(world: World) -> None:
    outsider = world.client("outsider")
    decide = reverse("admin:workflows_reviewitem_decide", args=[world.ids["task_item"]])
    response = outsider.post(decide, {"action": "approve"}, follow=True)
    assert any("group 'finance'" in str(m) for m in response.context["messages"])
    changelist = reverse("admin:workflows_reviewitem_changelist")
    response = outsider.post(changelist, {"action": "approve_selected", "_selected_action": [world.ids["task_item"]]},
                             follow=True)
    assert any("group 'finance'" in str(m) for m in response.context["messages"])
    assert _task_open(world)


def test_the_instance_page_offers_no_review_form(world: World) -> None:
    def config(role: str) -> tuple[dict[str, Any], str]:
        page = world.client(role).get(f"/instances/{world.task.pk}/").content.decode()
        match = re.search(r'<script id="live-config" type="application/json">(.*?)</script>', page, re.S)
        assert match
        return json.loads(match.group(1)), page

    for role in ("viewer", "designer", "outsider"):
        cfg, page = config(role)
        assert cfg["canDecide"] is False, role
        assert '<fieldset class="review-decide" disabled hidden>' in page, role
    cfg, page = config("outsider")
    assert "group 'finance'" in cfg["decideRefusal"]
    cfg, page = config("operator")
    assert cfg["canDecide"] is True and cfg["decideRefusal"] is None
    assert '<fieldset class="review-decide">' in page


# --- What the pages offer -------------------------------------------------------------------------

def test_only_staff_see_the_admin_link(world: World) -> None:
    plain = User.objects.create_user("plain")
    plain.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(plain)
    assert 'href="/admin/"' not in client.get("/").content.decode()
    assert 'href="/admin/"' in world.client("viewer").get("/").content.decode()


def test_viewers_get_a_view_button_designers_an_edit_button(world: World) -> None:
    def button(role: str) -> str:
        page = world.client(role).get("/workflows/").content.decode()
        match = re.search(rf'<a href="/workflows/{SLUG}/edit/" class="button">(\w+)</a>', page)
        assert match, role
        return match.group(1)

    assert [button(role) for role in ("viewer", "operator", "designer", "superuser")] == \
        ["View", "View", "Edit", "Edit"]


def test_the_hidden_attribute_wins_over_display_rules() -> None:
    """The review form is a flex box: without this rule `hidden` did not hide it."""
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "app.css").read_text()
    assert re.search(r"\[hidden\]\s*\{\s*display:\s*none\s*!important;?\s*\}", css)
