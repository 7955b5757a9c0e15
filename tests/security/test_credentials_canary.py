"""The credentials canary: plant secret values, run workflows that send them (an http node to a loopback
server that echoes everything back, an llm node to a provider that echoes its key in an error) on real
workers, then look for the values everywhere something is kept or shown: every text column of every
table, every Redis key, the workers' and this process's logs, the API, the pages and the WebSocket
frames. Each place is also shown to hold what travelled next to the secret (a marker the echo server
returns), so an absent canary means scrubbed, not unlooked-for."""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.test import Client, override_settings

from dashboard.asgi import application
from tests.conftest import Processes, wait_for
from tests.support.llm_server import LLMTestServer
from tests.workflows.support import expect_status
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import Credential, StepRun

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "canary-8f3a61c2e94b7d05-crm"  # noqa: S105 - planted test values
PROVIDER_KEY = "canary-2b7e9d4c1a6f3e80-llm"
MARKER = "echo-marker-4d1c"  # returned by the echo server next to the echoed secret
CANARIES = (SECRET, PROVIDER_KEY)


class _Echo(BaseHTTPRequestHandler):
    """Answers with everything it received (headers, query, body) plus MARKER: 200 on /echo, 400 on /reject."""

    seen: list[dict[str, Any]] = []

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        record = {"path": parts.path, "query": parse_qs(parts.query), "headers": dict(self.headers.items()),
                  "body": self.rfile.read(length).decode() if length else ""}
        type(self).seen.append(record)
        body = json.dumps({"marker": MARKER, "received": record}).encode()
        self.send_response(400 if parts.path == "/reject" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _handle

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Echo", (_Echo,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    server.shutdown()
    server.server_close()


def graphs(base: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ref = "{{ secrets.crm_token }}"
    sent = {"id": "fetch", "type": "http", "config": {
        "method": "POST", "url": f"{base}/echo",
        "headers": {"Authorization": f"Bearer {ref}", "X-Api-Key": ref},
        "json": {"token": ref, "note": f"key={ref}", "question": "{{ input.q }}"}}}
    ask = {"id": "ask", "type": "llm", "config": {
        "credential": "team-a", "model": "m1", "prompt": f"Use {ref} to answer {{{{ input.q }}}}"}}
    chain = {"nodes": [{"id": "start", "type": "start"}, sent, ask, {"id": "end", "type": "end"}],
             "edges": [{"source": "start", "target": "fetch"}, {"source": "fetch", "target": "ask"},
                       {"source": "ask", "target": "end"}]}
    rejected = {"id": "reject", "type": "http", "config": {
        "method": "GET", "url": f"{base}/reject?key={ref}", "headers": {"X-Api-Key": ref}}}
    refused = {"nodes": [{"id": "start", "type": "start"}, rejected, {"id": "end", "type": "end"}],
               "edges": [{"source": "start", "target": "reject"}, {"source": "reject", "target": "end"}]}
    return chain, refused


def database_dump() -> str:
    """Every value of every row of every table the project's models (and Django's) have."""
    parts: list[str] = []
    for model in apps.get_models(include_auto_created=True):
        if not model._meta.managed or model._meta.proxy:  # noqa: SLF001 - no table of its own
            continue
        for row in model._default_manager.values_list():  # noqa: SLF001 - the model's own manager
            parts.append(f"{model._meta.db_table}: {row!r}")  # noqa: SLF001
    return "\n".join(parts)


def _readable(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            value = zlib.decompress(value)  # RQ keeps job payloads compressed
        except zlib.error:
            pass
        return value.decode("utf-8", "replace")
    return repr(value)


def redis_dump(conn: Any) -> tuple[int, str]:
    parts: list[str] = []
    keys = list(conn.scan_iter(count=1000))
    for key in keys:
        kind = conn.type(key).decode()
        if kind == "string":
            value: Any = [conn.get(key)]
        elif kind == "hash":
            value = [item for pair in conn.hgetall(key).items() for item in pair]
        elif kind == "list":
            value = conn.lrange(key, 0, -1)
        elif kind == "set":
            value = list(conn.smembers(key))
        elif kind == "zset":
            value = [member for member, _ in conn.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            value = [repr(entry) for entry in conn.xrange(key)]
        else:
            value = []
        parts.append(_readable(key) + " " + " ".join(_readable(v) for v in value))
    return len(keys), "\n".join(parts)


def assert_absent(where: str, text: str) -> None:
    for canary in CANARIES:
        assert canary not in text, f"{where} holds a planted credential value"
    # Not even a recognisable piece of one (a truncated echo).
    for canary in CANARIES:
        assert canary[:16] not in text, f"{where} holds part of a planted credential value"


def test_planted_credentials_never_reach_anything_stored_or_shown(
        processes: Processes, worker_env: dict[str, str], redis_conn: Any, echo_server: Any, tmp_path: Path,
        django_user_model: Any, caplog: Any) -> None:
    base, seen = echo_server
    user = django_user_model.objects.create_superuser("root", password="correct horse battery staple")
    client = Client()
    client.force_login(user)
    with LLMTestServer(status=401) as llm, caplog.at_level(logging.DEBUG):
        llm.configure(echo_key=True)
        # Planted through the credentials page, as a designer would.
        page = client.post("/credentials/", {"name": "crm_token", "kind": "secret", "value": SECRET})
        assert page.status_code == 302, page.content.decode()
        with override_settings(DEBUG=True):  # the test provider speaks plain http on loopback
            page = client.post("/credentials/", {"name": "team-a", "kind": "llm_provider", "value": PROVIDER_KEY,
                                                 "base_url": llm.url, "allowed_models_text": "m1"})
        assert page.status_code == 302, page.content.decode()
        assert Credential.objects.count() == 2

        chain, refused = graphs(base)
        chain_version = save_version("canary-chain", chain)
        refused_version = save_version("canary-refused", refused)
        instance = runtime.start_instance(chain_version, {"q": "where is my order?"})
        other = runtime.start_instance(refused_version, {})

        worker_env.update({"STEADYFLOW_HTTP_ALLOWLIST": "127.0.0.1", "LOG_LEVEL": "DEBUG"})
        frames: list[str] = []

        async def watch() -> None:
            cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
            comm = WebsocketCommunicator(application, f"/ws/instances/{instance.pk}/",
                                         headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)])
            connected, _ = await comm.connect()
            assert connected
            frames.append(await comm.receive_from(timeout=5))  # hello, before any step ran
            processes.all_workers()
            while not any('"step_failed"' in frame and '"ask"' in frame for frame in frames):
                frames.append(await comm.receive_from(timeout=60))
            await comm.disconnect()

        async_to_sync(watch)()
        expect_status(instance, "failed", timeout=60)
        expect_status(other, "failed", timeout=60)
        wait_for(lambda: len(llm.requests) >= 1, message="the provider's request")
        processes.stop()

        # The receiving ends did get the values: the test would see any copy of them.
        echoed = next(r for r in seen if r["path"] == "/echo")
        assert echoed["headers"]["Authorization"] == f"Bearer {SECRET}" and echoed["headers"]["X-Api-Key"] == SECRET
        assert json.loads(echoed["body"])["token"] == SECRET
        assert next(r for r in seen if r["path"] == "/reject")["query"] == {"key": [SECRET]}
        (asked,) = llm.requests
        assert asked["authorization"] == f"Bearer {PROVIDER_KEY}"
        assert SECRET in json.dumps(asked["messages"])

        fetch = StepRun.objects.get(instance=instance, node_id="fetch")
        assert MARKER in json.dumps(fetch.output)  # the echo (with the secret in it) was stored, scrubbed
        assert fetch.input["json"]["token"] == "{{ secrets.crm_token }}"  # the reference, not the value
        ask = StepRun.objects.get(instance=instance, node_id="ask")
        assert "Incorrect API key provided" in ask.error["message"]

        # The database: every column of every row.
        dump = database_dump()
        assert MARKER in dump and "Incorrect API key provided" in dump
        assert_absent("the database", dump)

        # Redis: every key and value.
        count, text = redis_dump(redis_conn)
        assert count > 0
        assert_absent("Redis", text)

        # The API and the pages a viewer reads.
        shown: dict[str, str] = {}
        for path in (f"/api/instances/{instance.pk}", f"/api/instances/{instance.pk}/events",
                     f"/api/instances/{instance.pk}/steps", f"/api/instances/{other.pk}/steps",
                     f"/api/instances/{other.pk}/events", "/api/workflows/canary-chain/versions/1",
                     f"/instances/{instance.pk}/", f"/instances/{other.pk}/", "/workflows/canary-chain/edit/",
                     "/workflows/canary-chain/", "/credentials/", "/credentials/crm_token/", "/credentials/team-a/",
                     f"/admin/workflows/credential/{Credential.objects.get(name='crm_token').pk}/change/",
                     f"/admin/workflows/steprun/{fetch.pk}/change/", "/admin/workflows/event/",
                     "/admin/workflows/credential/"):
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            shown[path] = response.content.decode()
        assert MARKER in shown[f"/api/instances/{instance.pk}/steps"]
        for path, body in shown.items():
            assert_absent(path, body)

        # The WebSocket frames the instance page got while it ran.
        assert any("Incorrect API key provided" in frame for frame in frames)  # the provider's echo, scrubbed
        assert_absent("the WebSocket frames", "\n".join(frames))

    # The logs: the workers' (at DEBUG) and this process's.
    logs = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    assert "ai" in logs and logs.strip()
    assert_absent("the workers' logs", logs)
    assert_absent("this process's log", "\n".join(record.getMessage() for record in caplog.records))
