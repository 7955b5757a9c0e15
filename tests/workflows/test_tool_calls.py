"""Agent tool calls on real workers: an llm node's tool calls run as child steps (in parallel), their
results go back to the model, the round limit stops a model that never answers, bad arguments become
tool errors, and a worker killed mid-round does not make finished tool calls run again."""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import chain, wait_for
from tests.support.llm_server import LLMTestServer
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV, calls_so_far, tool_started_pid
from tests.workflows.support import assert_history_consistent, expect_status
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import StepRun, WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)

_slugs = itertools.count(1)
PARAMS = {"type": "object", "required": ["me"], "properties": {
    "me": {"type": "string"}, "other": {"type": "string"}, "hang_first": {"type": "boolean"},
    "run": {"type": "string"}}}
TOOLS = [{"name": name, "description": f"tool {name}", "parameters": PARAMS,
          "target": {"type": "python", "function": "tests.tool_rendezvous"}} for name in ("alpha", "beta")]
ANSWER = {"text": "done with tools", "usage": {"prompt_tokens": 30, "completion_tokens": 5, "cost_usd": 0.002}}


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    worker_env.update(EXTRA_FUNCTIONS_ENV)
    return worker_env


def agent(script: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    return {"id": "agent", "type": "llm", "retry": {"max_attempts": 3, "backoff_s": 0.1},
            "config": {"provider": "scripted", "prompt": "research", "tools": TOOLS, "script": script, **config}}


def both_tools(run: str = "", hang_beta: bool = False) -> dict[str, Any]:
    run = run or uuid.uuid4().hex
    return {"text": "calling both", "usage": {"prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.001},
            "tool_calls": [
                {"id": "c1", "name": "alpha", "args": {"me": "alpha", "other": "beta", "run": run}},
                {"id": "c2", "name": "beta", "args": {"me": "beta", "other": "alpha", "hang_first": hang_beta,
                                                      "run": run}}]}


def start(graph: dict[str, Any]) -> WorkflowInstance:
    return runtime.start_instance(save_version(f"tools-{next(_slugs)}", graph), {})


def default_workers(processes: Any, count: int = 2, env: dict[str, str] | None = None) -> None:
    """`count` workers on the default queue, registered before the test starts its instance: a round's
    tool steps go out as one job per listening worker (workflows/workers/dispatch.py, a fan-out's batching),
    so two calls run in parallel only where two workers listen."""
    import django_rq
    from rq import Queue, Worker

    for _ in range(count):
        processes.worker("default", env=env)
    connection = django_rq.get_connection("default")
    queue = Queue("default", connection=connection)
    wait_for(lambda: Worker.count(connection=connection, queue=queue) >= count, 60,
             message=f"{count} default workers")


def tool_steps(instance: WorkflowInstance) -> list[StepRun]:
    return list(instance.steps.filter(node_id__startswith="tool:agent:").order_by("node_id"))


def test_two_tool_calls_run_in_parallel_as_child_steps_and_their_results_feed_back(processes: Any) -> None:
    default_workers(processes)
    instance = start(chain(agent([both_tools(), ANSWER])))
    processes.worker("ai")
    expect_status(instance, "completed", timeout=60)

    alpha, beta = tool_steps(instance)
    parent = instance.steps.get(node_id="agent")
    assert (alpha.node_id, beta.node_id) == ("tool:agent:alpha", "tool:agent:beta")
    assert alpha.status == beta.status == "succeeded"
    assert alpha.input["parent_step"] == beta.input["parent_step"] == parent.pk
    assert alpha.idempotency_key == f"{parent.idempotency_key}:round1:c1"
    # Both ran at once: each started before the other finished (recorded times, not a stopwatch).
    assert alpha.started_at < beta.finished_at and beta.started_at < alpha.finished_at
    assert alpha.worker != beta.worker

    out = parent.output
    assert out["text"] == "done with tools" and out["tool_rounds"] == 1
    calls = {c["name"]: c for c in out["tool_calls"]}
    assert calls["alpha"]["args"]["other"] == "beta"
    assert calls["alpha"]["result"]["me"] == "alpha" and calls["alpha"]["step"] == alpha.pk
    assert calls["beta"]["result"]["me"] == "beta" and calls["beta"]["step"] == beta.pk
    # Both rounds' usage, on the step and (once) on the instance.
    assert out["usage"]["prompt_tokens"] == 40 and parent.usage["completion_tokens"] == 7
    instance.refresh_from_db()
    assert instance.tokens == 47 and float(instance.cost_usd) == pytest.approx(0.003)
    assert instance.loop_count >= 3  # agent, end, and the tool round
    assert instance.open_steps == 0
    assert_history_consistent(instance)


def test_the_provider_gets_the_tools_and_the_tool_messages(processes: Any) -> None:
    calls = [{"id": f"call_{n}", "type": "function",
              "function": {"name": n, "arguments": f'{{"me": "{n}", "other": "{o}"}}'}}
             for n, o in (("alpha", "beta"), ("beta", "alpha"))]
    node = agent([], provider="openai", model="tool-model")
    del node["config"]["script"]
    with LLMTestServer(reply="the answer") as server:
        server.configure(tool_calls=calls)
        default_workers(processes)
        instance = start(chain(node))
        processes.worker("ai", env={"STEADYFLOW_LLM_BASE_URL": server.url})
        expect_status(instance, "completed", timeout=60)
        first, second = server.requests
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["alpha", "beta"]
    assert first["body"]["tools"][0]["function"]["parameters"] == PARAMS
    messages = second["messages"]
    assert messages[-3]["role"] == "assistant" and [c["id"] for c in messages[-3]["tool_calls"]] == \
        ["call_alpha", "call_beta"]
    tool_messages = {m["tool_call_id"]: m["content"] for m in messages[-2:]}
    assert set(tool_messages) == {"call_alpha", "call_beta"} and '"me": "alpha"' in tool_messages["call_alpha"]
    assert instance.steps.get(node_id="agent").output["text"] == "the answer"


def test_the_round_limit_fails_the_step_naming_the_node(processes: Any) -> None:
    default_workers(processes)
    instance = start(chain(agent([both_tools()], max_tool_rounds=2)))
    processes.worker("ai")
    expect_status(instance, "failed", timeout=60)
    assert "node 'agent' reached its limit of 2 tool round(s)" in instance.error["message"]
    assert len(tool_steps(instance)) == 4  # two rounds of two calls, the third never ran
    assert instance.steps.get(node_id="agent").attempt == 1  # permanent: not retried


def test_a_bad_argument_becomes_a_tool_error_for_the_model(processes: Any) -> None:
    bad = {"text": "", "tool_calls": [{"id": "c1", "name": "alpha", "args": {"me": 5}},
                                      {"id": "c2", "name": "nope", "args": "{}"},
                                      {"id": "c3", "name": "beta", "args": "{not json"}]}
    instance = start(chain(agent([bad, ANSWER])))
    processes.worker("ai")
    expect_status(instance, "completed", timeout=60)
    assert tool_steps(instance) == []
    errors = {c["id"]: c["error"] for c in instance.steps.get(node_id="agent").output["tool_calls"]}
    assert "invalid arguments at me: 5 is not of type 'string'" in errors["c1"]
    assert "unknown tool 'nope'" in errors["c2"]
    assert "not valid JSON" in errors["c3"]


def test_a_worker_killed_mid_round_does_not_rerun_finished_tool_calls(processes: Any) -> None:
    lease = {"STEADYFLOW_LEASE_S": "3"}
    run = uuid.uuid4().hex
    default_workers(processes, env=lease)
    instance = start(chain(agent([both_tools(run, hang_beta=True), ANSWER])))
    processes.worker("ai", env=lease)
    processes.scheduler(env={**lease, "STEADYFLOW_SCHEDULER_INTERVAL_S": "0.2"})
    steps = StepRun.objects.filter(instance=instance)
    try:
        wait_for(lambda: steps.filter(node_id="tool:agent:alpha", status="succeeded").exists()
                 and steps.filter(node_id="tool:agent:beta", status="running", attempt=1).exists()
                 and tool_started_pid(run, "beta"), timeout=60, message="alpha done, beta running")
    except AssertionError:
        print(list(steps.values_list("node_id", "status", "attempt")))
        print([(e.seq, e.type, e.node_id, e.payload) for e in instance.events.order_by("seq")])
        raise
    pid = tool_started_pid(run, "beta")
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)  # the worker (its own process group) running beta
    processes.worker("default", env=lease)
    try:
        expect_status(instance, "completed", timeout=60)
    except AssertionError:
        print([(s.node_id, s.status, s.attempt, s.error) for s in steps.order_by("id")])
        print([(e.seq, e.type, e.node_id, e.payload) for e in instance.events.order_by("seq")])
        raise

    alpha, beta = tool_steps(instance)
    assert alpha.attempt == 1 and calls_so_far(f"{run}:alpha") == 1
    assert beta.attempt == 2 and calls_so_far(f"{run}:beta") == 2
    assert instance.events.filter(type="step_retrying", node_id="tool:agent:beta",
                                  payload__error__code="lease_expired").count() == 1
    parent = instance.steps.get(node_id="agent")
    # The model was asked twice in all: the answered round was not asked again.
    assert parent.output["tool_rounds"] == 1 and parent.output["text"] == "done with tools"
    assert instance.events.filter(type="step_waiting", node_id="agent").count() == 1
    assert {c["result"]["attempt"] for c in parent.output["tool_calls"]} == {1, 2}
    assert_history_consistent(instance)


class _Search(BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        type(self).paths.append(self.path)
        body = json.dumps({"hits": [self.path]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def search_server() -> Iterator[tuple[str, list[str]]]:
    handler = type("Search", (_Search,), {"paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.paths
    server.shutdown()
    server.server_close()


def test_an_http_tool_reads_its_args_and_a_failed_tool_becomes_an_error_for_the_model(
        processes: Any, search_server: tuple[str, list[str]]) -> None:
    base, paths = search_server
    web = {"name": "web", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
           "target": {"type": "http", "config": {"method": "GET", "url": base + "/search?q={{ args.q }}"}}}
    node = agent([{"tool_calls": [{"id": "w", "name": "web", "args": {"q": "durable"}},
                                  {"id": "f", "name": "alpha", "args": {"me": "alpha", "fail": True}}]}, ANSWER],
                 tools=[web, TOOLS[0]])
    node["config"]["tools"][1]["parameters"] = {"type": "object"}
    instance = start(chain(node))
    processes.worker("default")
    processes.worker("io", env={"STEADYFLOW_HTTP_ALLOWLIST": "127.0.0.1"})
    processes.worker("ai")
    expect_status(instance, "completed", timeout=60)
    assert paths == ["/search?q=durable"]
    calls = {c["id"]: c for c in instance.steps.get(node_id="agent").output["tool_calls"]}
    assert calls["w"]["result"]["body"] == {"hits": ["/search?q=durable"]}
    assert calls["f"]["error"] == "the tool failed: tool alpha refused"
    assert instance.steps.get(node_id="tool:agent:alpha").status == "failed"
    assert instance.steps.get(node_id="tool:agent:web").queue == "io"


def test_tool_rounds_count_for_the_loop_breaker(processes: Any) -> None:
    graph = chain(agent([both_tools()], max_tool_rounds=50), settings={"max_transitions": 4})
    default_workers(processes)
    instance = start(graph)
    processes.worker("ai")
    expect_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "loop_breaker"
    assert instance.error["node"] == "agent" and "tool round" in instance.error["message"]
    # The round that passed the limit is recorded, its tool steps parked until an operator decides.
    parked = instance.steps.filter(node_id__startswith="tool:agent:", status="pending")
    assert parked.count() == 2


def test_tool_calls_obey_max_concurrency(processes: Any) -> None:
    """Four calls, four idle workers, max_concurrency 2: the database shows at most two tool steps
    running at any time (from the committed events, in order, and from the recorded times)."""
    sleeper = {"name": "nap", "parameters": {"type": "object"},
               "target": {"type": "python", "function": "tests.sleep"}}
    ask = {"text": "four naps", "tool_calls": [{"id": f"c{n}", "name": "nap", "args": {"seconds": 0.5}}
                                               for n in range(1, 5)]}
    default_workers(processes, count=4)
    instance = start(chain(agent([ask, ANSWER], tools=[sleeper]), settings={"max_concurrency": 2}))
    processes.worker("ai")
    expect_status(instance, "completed", timeout=90)

    naps = list(instance.steps.filter(node_id="tool:agent:nap").order_by("visit"))
    assert len(naps) == 4 and {s.status for s in naps} == {"succeeded"}
    # Committed in order under the instance lock: a tool step starts, then ends.
    running, most = 0, 0
    for event in instance.events.filter(node_id="tool:agent:nap").order_by("seq"):
        if event.type == "step_started":
            running += 1
        elif event.type in ("step_succeeded", "step_failed", "step_retrying"):
            running -= 1
        most = max(most, running)
    assert most <= 2
    for nap in naps:
        overlapping = [s for s in naps if s.started_at <= nap.started_at < s.finished_at]
        assert len(overlapping) <= 2, [(s.visit, s.started_at, s.finished_at) for s in naps]
    held = instance.events.filter(node_id="tool:agent:nap", type="step_pending", payload__throttled=True)
    assert held.count() == 2
    assert instance.steps.get(node_id="agent").output["text"] == "done with tools"
    instance.refresh_from_db()
    assert instance.state["throttled"] == [] and instance.open_steps == 0
    assert_history_consistent(instance)
