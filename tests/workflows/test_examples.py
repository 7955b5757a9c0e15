"""The shipped examples, each started from the API with an empty input (so with the defaults the
example declares), run on real worker processes to its end state, with the usage and cost its
scripted LLM steps report.

The examples' URL defaults point at the demo endpoints of `make run`'s own server (dashboard/api/demo.py);
here a local server answers the same paths, and STEADYFLOW_DEMO_BASE_URL points load_examples at it,
as `make run` does with the port it took.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.api import demo_mcp
from tests.conftest import wait_for_status
from tests.workflows.support import assert_history_consistent, expect_status
from workflows.engine.validation import validate_graph
from workflows.examples import DEMO_ORIGIN, example_files, load_example
from workflows.models import Credential, ReviewItem, WorkflowDefinition, WorkflowInstance
from workflows.operators import review

pytestmark = pytest.mark.django_db(transaction=True)


class DemoServer:
    """The demo endpoints' paths (/demo/research/<kind>, /demo/ledger/<action>, /demo/notify/<action>),
    recording every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        demo = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                demo.requests.append(("GET", self.path, None))
                kind = self.path.split("?")[0].rsplit("/", 1)[-1]
                self._answer({"kind": kind, "items": [{"title": f"{kind} item"}]})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                demo.requests.append(("POST", self.path, body))
                if self.path == "/demo/mcp":  # the demo MCP server (dashboard/api/demo_mcp.py)
                    answer = demo_mcp.answer(body)
                    if answer is None:
                        self.send_response(202)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    return self._answer(answer)
                self._answer({"ok": True, "amount": body.get("amount")})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self) -> list[str]:
        return [path.split("?")[0] for _, path, _ in self.requests]


@pytest.fixture
def demo(settings: Any) -> Iterator[DemoServer]:
    server = DemoServer()
    settings.STEADYFLOW = {**settings.STEADYFLOW, "DEMO_BASE_URL": server.base}
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def running(processes: Any, demo: DemoServer, user_in: Any) -> tuple[Client, Any]:
    """The examples loaded, every worker up, and an operator's API client."""
    call_command("load_examples", stdout=io.StringIO())
    # As `make run` allow-lists its own demo endpoints: the host only under /demo/ (scripts/devrun.py).
    allow = demo.base.removeprefix("http://") + "/demo/"
    for queue in ("default", "io", "ai"):
        processes.worker(queue, env={"STEADYFLOW_HTTP_ALLOWLIST": allow})
    processes.scheduler()
    operator = user_in("operators", "olga")
    client = Client()
    client.force_login(operator)
    return client, operator


def start_with_defaults(client: Client, slug: str) -> WorkflowInstance:
    response = client.post(f"/api/workflows/{slug}/instances", data="{}", content_type="application/json")
    assert response.status_code == 201, response.content
    return WorkflowInstance.objects.get(pk=response.json()["id"])


def declared_defaults(slug: str) -> dict[str, Any]:
    version = WorkflowDefinition.objects.get(slug=slug).latest_version()
    assert version is not None
    fields = version.graph["input"]["properties"]
    return {name: field["default"] for name, field in fields.items()}


def llm_usage(instance: WorkflowInstance) -> tuple[int, Decimal]:
    steps = instance.steps.filter(queue="ai", status="succeeded")
    tokens = sum(s.output["usage"]["prompt_tokens"] + s.output["usage"]["completion_tokens"] for s in steps)
    cost = sum((Decimal(str(s.output["usage"]["cost_usd"])) for s in steps), Decimal(0))
    return tokens, cost


def assert_usage_recorded(instance: WorkflowInstance) -> None:
    tokens, cost = llm_usage(instance)
    assert tokens > 0 and cost > 0
    assert instance.tokens == tokens
    assert instance.cost_usd == cost.quantize(Decimal("0.000001"))


def test_every_example_declares_its_input_with_a_default_for_every_field() -> None:
    for path in example_files():
        document = load_example(path)
        schema = document["input"]
        assert schema["type"] == "object" and schema["properties"], path.name
        for name, field in schema["properties"].items():
            assert "default" in field and field.get("description"), (path.name, name)
        assert validate_graph({k: document[k] for k in ("nodes", "edges", "settings", "input")}) == []
        # Every scripted LLM response reports its usage.
        for node in document["nodes"]:
            for entry in (node.get("config") or {}).get("script") or []:
                assert entry["usage"]["prompt_tokens"] > 0 and entry["usage"]["cost_usd"] > 0, node["id"]


def test_load_examples_points_url_defaults_at_the_demo_base(settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "DEMO_BASE_URL": "http://127.0.0.1:8123"}
    call_command("load_examples", stdout=io.StringIO())
    assert declared_defaults("refund-saga")["ledger_base"] == "http://127.0.0.1:8123/demo/ledger"
    assert declared_defaults("industry-report")["research_base"] == "http://127.0.0.1:8123/demo/research"
    assert Credential.objects.get(name="demo-mcp").base_url == "http://127.0.0.1:8123/demo/mcp"
    document = load_example(next(p for p in example_files() if p.stem == "refund_saga"))
    assert document["input"]["properties"]["notify_base"]["default"] == f"{DEMO_ORIGIN}/demo/notify"


def test_react_agent_runs_with_its_defaults(running: tuple[Client, Any]) -> None:
    client, _ = running
    instance = start_with_defaults(client, "react-agent")
    expect_status(instance, "completed", timeout=60)
    assert instance.input == declared_defaults("react-agent")
    assert instance.context["reply"] == "Your order ships tomorrow."
    assert_usage_recorded(instance)
    assert_history_consistent(instance)


def test_industry_report_runs_with_its_defaults(running: tuple[Client, Any], demo: DemoServer) -> None:
    client, _ = running
    instance = start_with_defaults(client, "industry-report")
    expect_status(instance, "completed", timeout=60)
    assert instance.input["topic"] == "batteries"
    assert sorted(demo.paths()) == ["/demo/research/market", "/demo/research/news"]
    assert instance.context["sources"][0]["content"]["kind"] == "market"
    # The report itself is the run's result (its final context), not only a step's output.
    assert instance.context["report"].startswith("## Report")
    assert_usage_recorded(instance)
    # Within its budget (budget_usd 0.5), with a real figure to show.
    assert Decimal(0) < instance.cost_usd < Decimal("0.5")
    assert_history_consistent(instance)


def test_hallucination_loop_runs_with_its_defaults_into_the_loop_breaker(running: tuple[Client, Any]) -> None:
    client, _ = running
    instance = start_with_defaults(client, "hallucination-loop")
    wait_for_status(instance, {"halted", "failed"}, timeout=60)
    assert instance.halt_reason == "loop_breaker" and instance.input == {"ticket": "T-1"}
    assert_usage_recorded(instance)
    assert_history_consistent(instance)


def test_refund_saga_runs_with_its_defaults_through_its_approval(running: tuple[Client, Any],
                                                                 demo: DemoServer) -> None:
    client, operator = running
    instance = start_with_defaults(client, "refund-saga")
    wait_for_status(instance, "waiting", timeout=60)
    assert demo.requests == [("POST", "/demo/ledger/reserve", {"amount": 25})]
    item = ReviewItem.objects.get(instance=instance, status="open", reason="human_task")
    assert item.details["prompt"] == "Approve refund of 25?"
    review.decide(item.pk, operator, review.Decision(action="approve", note="fine"))
    expect_status(instance, "completed", timeout=60)
    assert demo.paths() == ["/demo/ledger/reserve", "/demo/ledger/pay", "/demo/notify/send"]
    assert_usage_recorded(instance)
    assert_history_consistent(instance)


def test_support_desk_runs_react_agent_as_a_sub_workflow_with_its_defaults(running: tuple[Client, Any]) -> None:
    client, _ = running
    instance = start_with_defaults(client, "support-desk")
    expect_status(instance, "completed", timeout=60)
    [child] = WorkflowInstance.objects.filter(parent_step__instance=instance)
    assert child.status == "completed" and child.version.definition.slug == "react-agent"
    assert child.input == {"question": "Where is my order 42?"}
    assert instance.context["agent"] == {"reply": "Your order ships tomorrow.", "agent_instance": child.pk}
    # The agent's spending counts toward the parent's totals (and so its budget).
    note = instance.steps.get(node_id="note")
    assert instance.tokens == child.tokens + note.usage["prompt_tokens"] + note.usage["completion_tokens"]
    assert instance.cost_usd == child.cost_usd + Decimal(str(note.usage["cost_usd"]))
def test_order_desk_asks_the_demo_mcp_server(running: tuple[Client, Any], demo: DemoServer) -> None:
    client, _ = running
    instance = start_with_defaults(client, "order-desk")
    wait_for_status(instance, "completed")
    calls = [body for method, path, body in demo.requests if path == "/demo/mcp" and body.get("method") == "tools/call"]
    assert [c["params"]["arguments"] for c in calls] == [{"order_id": "A-100"}]
    tool = instance.steps.get(node_id="tool:agent:order_status")
    assert tool.output["structured"]["carrier"] == "DHL"
    instance.refresh_from_db()
    assert instance.context["answer"].startswith("Order A-100 has shipped")


def test_the_order_desk_dataset_evaluates_on_the_workers(running: tuple[Client, Any], demo: DemoServer) -> None:
    out = io.StringIO()
    call_command("evaluate", "order-desk", "--dataset", "smoke", "--timeout", "120", stdout=out, stderr=io.StringIO())
    report = json.loads(out.getvalue())
    assert (report["rows"], report["passed"], report["errors"]) == (2, 2, 0)
    assert float(report["cost_usd"]) > 0 and report["tokens"] > 0
    # Its runs are the generated copy's, not the example's own.
    assert not WorkflowInstance.objects.filter(version__definition__slug="order-desk").exists()


def test_research_agent_runs_its_two_tools_in_parallel_and_answers(running: tuple[Client, Any]) -> None:
    client, _ = running
    instance = start_with_defaults(client, "research-agent")
    expect_status(instance, "completed", timeout=60)
    agent = instance.steps.get(node_id="agent")
    assert agent.output["tool_rounds"] == 1
    assert {c["name"]: c["result"] is not None for c in agent.output["tool_calls"]} == {"search": True, "lookup": True}
    tools = instance.steps.filter(node_id__startswith="tool:agent:")
    assert sorted(s.node_id for s in tools) == ["tool:agent:lookup", "tool:agent:search"]
    assert instance.context["answer"].startswith("Durable execution")
    assert instance.tokens == 660 and instance.cost_usd == Decimal("0.000170")
    assert_usage_recorded(instance)
    assert_history_consistent(instance)
