"""Every page and action sends a number of SQL statements that does not grow with the data (issue 22
item 20): each is measured in a world of N workflows (instances, steps, review items, triggers) and again
after 9N more, and must send the same count. Counted, not timed (timings are in docs/BENCHMARKS.md,
*Page timings*, measured by `python -m bench.pages`). A page that loads a row per workflow, instance or
item (an N+1) fails here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import chain
from workflows.models import Credential, CredentialKind, ReviewItem, StepRun, WorkflowInstance
from workflows.triggers.models import Schedule, Webhook

GRAPH = chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}},
              {"id": "nap", "type": "wait", "config": {"seconds": 1}})
N = 2


class World:
    """Rows as the engine leaves them, made directly (no workers): per workflow a version, three instances
    (completed, failed, waiting on a human task with its open review item), each with steps."""

    def __init__(self, make_version: Callable[..., Any]) -> None:
        self.make_version = make_version
        self.made = 0
        self.first: Any = None
        self.visits = 1

    def grow(self, workflows: int) -> None:
        now = timezone.now()
        for _ in range(workflows):
            self.made += 1
            version = self.make_version(GRAPH, slug=f"flow-{self.made}")
            for status in ("completed", "failed", "waiting"):
                inst = WorkflowInstance.objects.create(
                    version=version, status=status, max_transitions=10, input={"n": self.made},
                    context={"seen": list(range(20))}, tokens=10,
                    error={"node": "nap", "message": "boom"} if status == "failed" else None,
                    finished_at=now if status != "waiting" else None)
                waits = status == "waiting"
                for n, node in enumerate(("start", "ask") if waits else ("start", "ask", "nap")):
                    step = StepRun.objects.create(
                        instance=inst, node_id=node, node_type={"start": "start", "ask": "human"}.get(node, "wait"),
                        visit=1, attempt=1, status="pending" if waits and node == "ask" else "succeeded",
                        queue="default", idempotency_key=f"{inst.pk}-{n}", trace_id="t", started_at=now,
                        finished_at=None if waits and node == "ask" else now, usage={"tokens": 5} if n else None)
                if waits:
                    ReviewItem.objects.create(instance=inst, step=step, node_id="ask", reason="human_task",
                                              details={"prompt": "ok?"})
            Webhook.objects.create(definition=version.definition, name=f"hook {self.made}",
                                   input_mapping={"n": "/n"})
            Schedule.objects.create(definition=version.definition, cron="0 3 * * *", input={"n": self.made})
            credential = Credential(name=f"key_{self.made}", kind=CredentialKind.SECRET, updated_at=now)
            credential.set_value("s3cret-value")
            credential.save()
            if self.first is None:
                self.first = version
        # The measured instance gets more steps as the world grows, too.
        first = WorkflowInstance.objects.filter(version=self.first).order_by("pk").first()
        assert first is not None
        for _ in range(workflows * 3):
            self.visits += 1
            StepRun.objects.create(instance=first, node_id="nap", node_type="wait", visit=self.visits, attempt=1,
                                   status="succeeded", queue="default", idempotency_key=f"{first.pk}-v{self.visits}",
                                   trace_id="t", started_at=now, finished_at=now, usage={"prompt_tokens": 1})


def requests(world: World) -> dict[str, Callable[[Client], Any]]:
    slug = world.first.definition.slug
    inst = WorkflowInstance.objects.filter(version=world.first).order_by("pk").first()
    assert inst is not None
    item = ReviewItem.objects.order_by("pk").first()
    assert item is not None
    return {
        "dashboard": lambda c: c.get("/"),
        "dashboard stats": lambda c: c.get("/api/dashboard"),
        "workflow list": lambda c: c.get("/workflows/"),
        "definition page": lambda c: c.get(f"/workflows/{slug}/"),
        "editor page": lambda c: c.get(f"/workflows/{slug}/edit/"),
        "editor versions": lambda c: c.get(f"/api/workflows/{slug}/versions"),
        "validate": lambda c: c.post("/api/validate", {"graph": GRAPH}, content_type="application/json"),
        "instance list": lambda c: c.get("/instances/"),
        "instance list json": lambda c: c.get("/instances/?format=json"),
        "instance page": lambda c: c.get(f"/instances/{inst.pk}/"),
        "instance steps": lambda c: c.get(f"/api/instances/{inst.pk}/steps"),
        "run report": lambda c: c.get(f"/instances/{inst.pk}/report/"),
        "review inbox": lambda c: c.get("/review/"),
        "review api": lambda c: c.get("/api/reviews?limit=0"),
        "review item": lambda c: c.get(f"/review/{item.pk}/"),
        "triggers": lambda c: c.get(f"/workflows/{slug}/triggers/"),
        "API tokens": lambda c: c.get("/account/tokens/"),
        "credentials": lambda c: c.get("/credentials/"),
    }


def counts(client: Client, world: World) -> dict[str, int]:
    found = {}
    for name, call in requests(world).items():
        cache.clear()  # the uncached path: the dashboard's figures are cached for a second
        with CaptureQueriesContext(connection) as queries:
            response = call(client)
        assert response.status_code == 200, (name, response.status_code)
        found[name] = len(queries)
    return found


@pytest.fixture
def designer_operator(user_in: Any, roles: dict[str, Any]) -> Client:
    user = user_in("designers", "dana")
    user.groups.add(roles["operators"], roles["viewers"])
    client = Client()
    client.force_login(user)
    return client


def test_no_page_sends_more_statements_for_more_workflows_instances_or_items(
        make_version: Any, designer_operator: Client) -> None:
    world = World(make_version)
    world.grow(N)
    small = counts(designer_operator, world)
    world.grow(9 * N)
    assert WorkflowInstance.objects.count() == 30 * N and ReviewItem.objects.count() == 10 * N
    large = counts(designer_operator, world)
    grew = {name: (small[name], large[name]) for name in small if large[name] != small[name]}
    assert grew == {}, f"statements (N -> 10N) grew on: {grew}"


def test_a_decision_sends_as_many_statements_whatever_the_inbox_holds(make_version: Any,
                                                                        designer_operator: Client) -> None:
    """The inbox's decision (the review API's POST) and the next item's page it leads to."""
    world = World(make_version)
    world.grow(N)

    def decide() -> tuple[int, int]:
        item = ReviewItem.objects.filter(status="open").order_by("pk").first()
        assert item is not None
        with CaptureQueriesContext(connection) as posted:
            response = designer_operator.post(f"/api/instances/{item.instance_id}/review",
                                              {"action": "approve", "item": item.pk}, content_type="application/json")
        assert response.status_code == 200, response.content
        with CaptureQueriesContext(connection) as following:
            designer_operator.get(f"/review/next/?after={item.pk}", follow=True)
        return len(posted), len(following)

    small = decide()
    world.grow(9 * N)
    assert decide() == small


def test_the_dashboard_sends_as_many_statements_for_one_loaded_example_as_for_all(designer_operator: Client) -> None:
    """The dashboard's example cards read every example's latest version in one statement (they read
    one per example before)."""
    from workflows.authoring.definitions import save_document
    from workflows.examples import DEMO_ORIGIN, example_files, load_example
    from workflows.management.commands.load_examples import ensure_demo_mcp

    ensure_demo_mcp(DEMO_ORIGIN)  # the order-desk example's MCP server
    files = example_files()
    assert len(files) >= 4

    def dashboard() -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as queries:
            assert designer_operator.get("/").status_code == 200
        return len(queries)

    save_document(load_example(files[0]), message="example")
    one = dashboard()
    for path in files[1:]:
        save_document(load_example(path), message="example")
    page = designer_operator.get("/").content.decode()
    assert page.count('class="example"') == len(files)
    assert dashboard() == one


def test_duplicating_again_sends_as_many_statements_as_the_first_time(make_version: Any,
                                                                      designer_operator: Client) -> None:
    """The copy's slug is found in one statement, whatever number of copies exist (it probed them one by one)."""
    make_version(GRAPH, slug="triage")

    def duplicate() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = designer_operator.post("/workflows/triage/duplicate")
        assert response.status_code == 302
        return len(queries)

    first = duplicate()
    for _ in range(8):
        duplicate()
    assert duplicate() == first
    assert WorkflowInstance.objects.count() == 0 and "triage-copy-10" in response_slugs()


def response_slugs() -> set[str]:
    from workflows.models import WorkflowDefinition

    return set(WorkflowDefinition.objects.values_list("slug", flat=True))
