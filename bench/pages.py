"""Page timings: each page and action of the dashboard, its server time and query count, in a world
like a designer's second hour (the examples loaded, instances with steps, open review items).

    DEBUG=1 DATABASE_URL=postgres://.../sf_pages_bench .venv/bin/python scripts/devrun.py with-redis -- \\
        .venv/bin/python -m bench.pages [--instances 50] [--repeat 7] [--fresh] [--decide]

Runs in this process through Django's test client (no network, no static files): the figure is the
server's time for a request, the median of --repeat runs after one warm-up, and the statements it
sent (counted on a separate run, so the count's bookkeeping is not in the time). Writes nothing
into a database that already holds the world unless --fresh (which migrates and seeds it). Prints
one line per page and a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")


def seed(instances: int) -> None:
    """Migrate, load the examples, start `instances` instances spread over them and run their steps in
    this process (http steps against the demo server fail or halt: a realistic mix of statuses)."""
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from workflows import runtime
    from workflows.models import WorkflowDefinition
    from workflows.scheduler.inprocess import drain

    call_command("migrate", verbosity=0)
    call_command("load_examples", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
    user.groups.set(Group.objects.all())
    definitions = [d for d in WorkflowDefinition.objects.all() if d.versions.exists()]
    for n in range(instances):
        definition = definitions[n % len(definitions)]
        try:
            runtime.start_instance(definition.versions.order_by("-number")[0], {})
        except Exception as exc:  # noqa: BLE001 - an example that needs input: skipped
            print(f"skip {definition.slug}: {exc}")
    for _ in range(6):
        drain()


def pages(client: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(label, request) for every page and action measured."""
    from workflows.models import ReviewItem, WorkflowDefinition, WorkflowInstance

    definition = WorkflowDefinition.objects.filter(versions__isnull=False).order_by("pk").first()
    assert definition is not None, "no workflow: run with --fresh"
    slug = definition.slug
    version = definition.versions.order_by("-number").first()
    instance = WorkflowInstance.objects.filter(steps__isnull=False).order_by("-pk").first()
    assert instance is not None and version is not None
    item = ReviewItem.objects.order_by("-pk").first()
    graph_body = {"graph": version.graph}
    counter = {"n": 0}

    def duplicate() -> Any:
        return client.post(f"/workflows/{slug}/duplicate")

    def archive() -> Any:
        counter["n"] += 1
        return client.post(f"/workflows/{slug}/archive", {"archived": "1" if counter["n"] % 2 else "0"})

    out: list[tuple[str, Callable[[], Any]]] = [
        ("dashboard", lambda: client.get("/")),
        ("dashboard stats (api)", lambda: client.get("/api/dashboard")),
        ("workflow list", lambda: client.get("/workflows/")),
        ("definition page", lambda: client.get(f"/workflows/{slug}/")),
        ("editor page", lambda: client.get(f"/workflows/{slug}/edit/")),
        ("editor versions (api)", lambda: client.get(f"/api/workflows/{slug}/versions")),
        ("validate", lambda: client.post("/api/validate", graph_body, content_type="application/json")),
        ("duplicate", duplicate),
        ("archive/unarchive", archive),
        ("instance list", lambda: client.get("/instances/")),
        ("instance page", lambda: client.get(f"/instances/{instance.pk}/")),
        ("instance (api)", lambda: client.get(f"/api/instances/{instance.pk}")),
        ("run report", lambda: client.get(f"/instances/{instance.pk}/report/")),
        ("review inbox", lambda: client.get("/review/")),
        ("triggers", lambda: client.get(f"/workflows/{slug}/triggers/")),
        ("API tokens", lambda: client.get("/account/tokens/")),
        ("credentials", lambda: client.get("/credentials/")),
    ]
    if item is not None:
        out.append(("review item page", lambda: client.get(f"/review/{item.pk}/")))
    return out


def decision(client: Any) -> list[tuple[str, float, int]]:
    """The inbox's decision as the page makes it: the review API's POST, then the next item's page (the
    redirect target). Each open item is decided once, so fewer runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from workflows.models import ReviewItem

    items = list(ReviewItem.objects.filter(status="open").order_by("pk")[:6])
    times: list[float] = []
    counts: list[int] = []
    for item in items:
        url = f"/api/instances/{item.instance_id}/review"
        body = {"action": "approve" if item.reason == "human_task" else "cancel", "item": item.pk}
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.post(url, body, content_type="application/json")
        if response.status_code >= 400:
            print(f"decision on item {item.pk} ({item.reason}): {response.status_code} {response.content[:200]!r}")
            continue
        times.append((time.perf_counter() - started) * 1000)
        counts.append(len(queries))
    return [("review decision (api POST)", statistics.median(times), max(counts))] if times else []


def measure(repeat: int, decide: bool) -> list[tuple[str, float, int]]:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="localhost")
    client.force_login(User.objects.get(username="bench"))
    rows: list[tuple[str, float, int]] = []
    for label, call in pages(client):
        response = call()  # warm-up: imports, per-process caches
        assert response.status_code < 400, (label, response.status_code)
        times = []
        for _ in range(repeat):
            cache.clear()  # a visit seconds after the last one: the dashboard's 1 s figures are gone
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        cache.clear()
        with CaptureQueriesContext(connection) as queries:
            call()
        rows.append((label, statistics.median(times), len(queries)))
    # The dashboard as a browser loads it: the page, then its script's request for the same figures.
    times, count = [], 0
    for _ in range(repeat):
        cache.clear()
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            client.get("/")
            client.get("/api/dashboard")
        times.append((time.perf_counter() - started) * 1000)
        count = len(queries)
    rows.append(("dashboard + its stats request", statistics.median(times), count))
    return rows + (decision(client) if decide else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fresh", action="store_true", help="migrate and seed the database first")
    parser.add_argument("--decide", action="store_true", help="also decide up to 6 open review items (uses them up)")
    args = parser.parse_args()
    import django

    django.setup()
    if args.fresh:
        seed(args.instances)
    load = os.getloadavg()
    rows = measure(args.repeat, args.decide)
    from workflows.models import WorkflowInstance

    print(f"instances: {WorkflowInstance.objects.count()}, load before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| Page or action | ms (median) | queries |\n|---|---:|---:|")
    for label, ms, count in rows:
        print(f"| {label} | {ms:.0f} | {count} |")


if __name__ == "__main__":
    main()
