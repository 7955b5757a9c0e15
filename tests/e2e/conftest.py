"""Browser fixtures: Playwright driving Debian's chromium (Playwright cannot download its own here).

- `browser`: one chromium per test module. Playwright's sync API keeps an asyncio loop running in the
  main thread while it is alive, which breaks `asyncio.run` in later tests and trips Django's
  async-safety check; so it lives only as long as the module, and DJANGO_ALLOW_ASYNC_UNSAFE is set only
  meanwhile (ORM calls in these tests run between browser calls, never concurrently with them).
- `page`: a fresh browser context and page per test, 1440x900.
- `login(page, user)`: log in through the real login form.
- `make_user(username, *groups)`: a user in the given permission groups (password "pw").
- `doc_shot(page_or_locator, "name.png", **kwargs)`: a picture for docs/screenshots, taken only by
  `make screenshots` (tests/e2e/docshots.py).

Pages without WebSockets use pytest-django's `live_server` (WSGI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.docshots import doc_shot  # noqa: F401 - the fixture for the docs' pictures (make screenshots)
from tests.support.web import DaphneServer

CHROMIUM = Path(os.environ.get("STEADYFLOW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
PASSWORD = "pw"
ROOT = Path(__file__).resolve().parents[2]


def note_console(message: Any, console: list[str], errors: list[str]) -> None:
    """Keep the console for failure reports; a Content-Security-Policy violation is a script error too
    (the pages must work under the policy dashboard/security/headers.py sends)."""
    console.append(f"{message.type}: {message.text}")
    if "Content Security Policy" in message.text:
        errors.append(f"CSP violation: {message.text}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); CI does")
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser: Any, live_server: Any, transactional_db: None, request: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900},
                                  accept_downloads=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: note_console(message, console, errors))
    page.js_errors = errors  # tests assert the page ran without script errors
    yield page
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        shot = tmp_path / "failure.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the failure: {shot}; script errors: {errors}")
        print("browser console:\n" + "\n".join(console[-50:]))
    context.close()


def ensure_role_groups() -> None:
    """(Re)create the permission groups the migrations define: a transactional test's flush empties them."""
    from django.contrib.auth.models import Group, Permission

    from workflows.roles import ensure_roles

    # workflows/roles.py is the whole list (a migration such as 0008's credentials names its codenames
    # otherwise than ROLES): without it a designer lost the credentials pages after an earlier test's flush.
    ensure_roles()
    for module in sorted((ROOT / "workflows" / "migrations").glob("0*.py")):
        roles = getattr(import_module(f"workflows.migrations.{module.stem}"), "ROLES", None)
        for name, codenames in (roles or {}).items():
            group, _ = Group.objects.get_or_create(name=name)
            group.permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                             codename__in=codenames))


@pytest.fixture
def make_user(transactional_db: None) -> Callable[..., Any]:
    """make_user("dana", "designers"): a user in those groups, with the password "pw"."""
    from django.contrib.auth.models import Group, User

    ensure_role_groups()

    def make(username: str, *groups: str) -> Any:
        user = User.objects.create_user(username=username, password=PASSWORD)
        for name in groups:
            user.groups.add(Group.objects.get(name=name))
        return user

    return make


@pytest.fixture
def login() -> Callable[[Any, Any], None]:
    def do_login(page: Any, user: Any) -> None:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login/" not in url)

    return do_login


# --- Pages with WebSockets: daphne (ASGI) on a free port -------------------------------------------
# pytest-django's live_server is WSGI only. `daphne_server` runs the real ASGI application
# (tests/support/web.py) against the test database and Redis (the workers' environment, see
# tests/conftest.py), with DEBUG on so it serves the static files; it can be killed and restarted on the same
# port (tests of reconnecting pages). `daphne_page` is `page` for that server.

@pytest.fixture
def daphne_server(worker_env: dict[str, str], tmp_path: Path) -> Iterator[DaphneServer]:
    server = DaphneServer({**worker_env, "DEBUG": "1"}, tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def daphne_page(browser: Any, daphne_server: DaphneServer, request: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(base_url=daphne_server.url, viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: note_console(message, console, errors))
    page.js_errors = errors
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        shot = tmp_path / "failure.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot of the failure: {shot}; script errors: {errors}")
        print("browser console:\n" + "\n".join(console[-50:]))
        print("daphne:\n" + daphne_server.logs())
    context.close()
