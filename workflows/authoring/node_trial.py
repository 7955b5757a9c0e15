"""Test one node from the editor: run its kind's handler on sample data, without an instance.

The editor sends the (possibly unsaved) graph, the node's id and a sample (`context`, `input`,
`steps` as they would be when the node runs); an llm node may be given a pinned scripted response
instead of calling its provider. The answer is the rendered config (secret references stay
`{{ secrets.NAME }}` placeholders; values are scrubbed), the output, the context updates, which
outgoing edges' conditions hold, and the error when the handler failed.

Nothing is written: no instance, step or event rows; no breaker verdict; no response cache.

Where it runs: in the web process, but never on the request's own thread. Django runs synchronous
views of an ASGI server on one shared thread, so the handler runs on a thread of its own and the view
waits for it at most the node's timeout (capped at MAX_TRIAL_S). The limits of a step apply: templates
and conditions render under the evaluation budget, http and llm calls go through the guarded outbound
client (SSRF checks, body cap, total deadline, so they end on their own), and the output is held to
STEADYFLOW_MAX_PAYLOAD_BYTES. A python function is operator-written code and cannot be interrupted
from outside; when it overruns, the answer says so and its thread is left to finish, holding one of
the MAX_CONCURRENT slots until it does (so a stuck function cannot pile up threads). Running it on an
RQ worker instead would need a result channel and a free worker for an interactive click; the
guarantees the worker adds (SIGALRM timeouts) only matter for python functions, which are trusted.
"""

from __future__ import annotations

import asyncio
import secrets as random_tokens
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from workflows.credentials import store as credentials
from workflows.engine import expressions, outbound
from workflows.engine.errors import ExpressionError, GraphInvalid, PayloadTooLarge, StepError, StepTimeout
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes import NodeResult, StepCall, get_kind
from workflows.engine.samples import sample_issues
from workflows.engine.validation import validate_graph
from workflows.runtime import check_payload, conf, engine_config, redacted_config

# Kinds a test may run: the others wait for a person, a timer or a child instance.
TESTABLE = ("python", "http", "llm", "router")
MAX_TRIAL_S = 60.0  # the longest the editor's request waits for a handler
MAX_CONCURRENT = 4  # handlers running at once in one web process (a python function that overran counts)
_slots = threading.BoundedSemaphore(MAX_CONCURRENT)


class TrialRefused(ValueError):
    """A test that cannot run as asked (the message says why): a 400, or `status`."""

    def __init__(self, message: str, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.extra = extra


@dataclass
class Sample:
    context: dict[str, Any] = field(default_factory=dict)
    input: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, Any] = field(default_factory=dict)


def parse_sample(value: Any) -> Sample:
    problems = sample_issues(value if value is not None else {})
    if problems:
        raise TrialRefused("; ".join(problems))
    value = value or {}
    return Sample(context=dict(value.get("context") or {}), input=dict(value.get("input") or {}),
                  steps=dict(value.get("steps") or {}))


def pinned_sample(graph_json: Any, node_id: str) -> tuple[Any, Any]:
    """The sample and llm response pinned to a node (the editor's *Pin sample*), or (None, None): what a
    test runs with when the request brings neither."""
    nodes = graph_json.get("nodes") if isinstance(graph_json, dict) else None
    raw = next((n for n in nodes or [] if isinstance(n, dict) and n.get("id") == node_id), None)
    pinned = raw.get("sample") if raw is not None else None
    if not isinstance(pinned, dict):
        return None, None
    sample = {key: value for key, value in pinned.items() if key != "pinned_response"}
    return sample, pinned.get("pinned_response")


def pinned_script(response: Any) -> list[dict[str, Any]]:
    """A pinned llm response as the scripted provider's one-entry script (checked against its schema)."""
    from jsonschema import Draft202012Validator

    from workflows.engine.nodes.llm import LLM

    if not isinstance(response, dict):
        raise TrialRefused("'pinned_response' must be a JSON object such as {\"text\": \"...\"}")
    schema = LLM.config_schema["properties"]["script"]["items"]
    errors = sorted(Draft202012Validator(schema).iter_errors(response), key=str)
    if errors:
        raise TrialRefused(f"'pinned_response' is not a scripted response: {errors[0].message}")
    return [response]


def node_of(graph_json: Any, node_id: str) -> tuple[Graph, Node]:
    """The node to test, from a graph whose problems do not touch it (an unsaved graph may be
    unfinished elsewhere: a missing end node does not stop testing a router)."""
    if not isinstance(graph_json, dict):
        raise TrialRefused("'graph' must be a JSON object with 'nodes' and 'edges'")
    issues = validate_graph(graph_json)
    raw_nodes = [n for n in graph_json.get("nodes") or [] if isinstance(n, dict)]
    raw = next((n for n in raw_nodes if n.get("id") == node_id), None)
    if raw is None:
        raise TrialRefused(f"the graph has no node '{node_id}'", 404)
    if raw.get("type") not in TESTABLE:
        raise TrialRefused(f"node '{node_id}' is a {raw.get('type')} node, which cannot be tested alone "
                           f"(testable kinds: {', '.join(TESTABLE)})")
    mine = [issue for issue in issues if issue.node == node_id]
    if mine:
        raise TrialRefused(f"node '{node_id}' is invalid: {mine[0].message}",
                           errors=[issue.as_dict() for issue in mine])
    try:
        graph = Graph.from_json(graph_json)
    except (GraphInvalid, KeyError, TypeError, ValueError) as exc:
        raise TrialRefused(f"the graph cannot be read: {exc}",
                           errors=[issue.as_dict() for issue in issues]) from None
    return graph, graph.nodes[node_id]


def run_trial(graph_json: Any, node_id: str, sample_json: Any, pinned_response: Any = None) -> dict[str, Any]:
    """Run one node's handler on a sample; the answer the editor's Test panel shows. Raises TrialRefused."""
    graph, node = node_of(graph_json, node_id)
    sample = parse_sample(sample_json)
    kind = get_kind(node.type)
    raw = dict(node.config)
    if pinned_response is not None:
        if node.type != "llm":
            raise TrialRefused("'pinned_response' is for llm nodes only")
        # The pinned reply stands in for the provider: the scripted provider returns it.
        raw = {**{k: v for k, v in raw.items() if k != "credential"}, "provider": "scripted",
               "script": pinned_script(pinned_response)}
        node = Node(**{**node.__dict__, "config": raw})
    try:
        scope, account = credentials.for_node(node, kind.raw_config_keys)
    except StepError as exc:
        raise TrialRefused(exc.message) from None
    names = {"context": sample.context, "steps": sample.steps, "input": sample.input}
    started = time.monotonic()
    try:
        config = {key: (value if key in kind.raw_config_keys
                        else expressions.render(scope.protect(value) if scope is not None else value, names))
                  for key, value in raw.items()}
    except ExpressionError as exc:
        return {"node": node_id, "type": node.type, "config": None, "output": None, "context_updates": {},
                "usage": None, "routing": [], "duration_ms": round((time.monotonic() - started) * 1000),
                "error": {"code": "permanent", "message": f"template failed: {exc}"}}
    now = timezone.now()
    call = StepCall(
        node=node, config=config, context=sample.context, steps=sample.steps, start_input=sample.input,
        instance_id=0, visit=1, attempt=1, idempotency_key=f"test:{node_id}:{random_tokens.token_hex(8)}",
        trace_id=f"00-{random_tokens.token_hex(16)}-{random_tokens.token_hex(8)}-01", now=now,
        activated_at=now, engine=engine_config(), secrets=scope, provider=account,
    )
    timeout = min(float(node.timeout_s or conf("DEFAULT_STEP_TIMEOUT_S")), MAX_TRIAL_S)
    result, error = _run_handler(call, timeout)
    answer: dict[str, Any] = {"node": node_id, "type": node.type, "config": redacted_config(config, scope),
                              "output": None, "context_updates": {}, "usage": None, "routing": [], "error": None}
    if result is not None:
        output = scope.scrub(result.output) if scope is not None else result.output
        updates = scope.scrub(result.context_updates) if scope is not None else result.context_updates
        try:
            check_payload(f"output of node {node_id}", output)
        except PayloadTooLarge as exc:
            error, output = exc, None
        answer.update(output=output, context_updates=updates, usage=result.usage)
        if error is None:
            answer["routing"] = routing(graph, node_id, output, {**sample.context, **(updates or {})}, sample)
    if error is not None:
        if scope is not None:
            scope.scrub_error(error)
        answer["error"] = {"code": error.code, "message": error.message}
    answer["duration_ms"] = round((time.monotonic() - started) * 1000)
    return answer


def routing(graph: Graph, node_id: str, output: Any, context: dict[str, Any], sample: Sample) -> list[dict[str, Any]]:
    """Each outgoing edge and whether its condition holds for this output (an error names the edge)."""
    names = expressions.condition_names(output, context, sample.steps, sample.input)
    edges = []
    for edge in graph.outgoing(node_id):
        entry: dict[str, Any] = {"index": edge.index, "target": edge.target, "when": edge.when}
        try:
            entry["fires"] = edge.when is None or bool(expressions.evaluate(edge.when, names))
        except ExpressionError as exc:
            entry["fires"] = False
            entry["error"] = f"condition failed: {exc}"
        edges.append(entry)
    return edges


def _run_handler(call: StepCall, timeout: float) -> tuple[NodeResult | None, StepError | None]:
    """The handler on a thread of its own, waited for at most `timeout` seconds."""
    from workflows.runtime import as_step_error

    if not _slots.acquire(blocking=False):
        raise TrialRefused(f"{MAX_CONCURRENT} node tests are already running: try again shortly", 429)
    kind = get_kind(call.node.type)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            if kind.is_async:
                async def bounded() -> NodeResult:
                    async with asyncio.timeout(timeout):
                        return await kind.arun(call)

                # A loop of its own, whose provider sessions are closed before it ends.
                box["result"] = outbound.run_closing(bounded())
            else:
                box["result"] = kind.run(call)
        except TimeoutError:
            box["error"] = StepTimeout(f"node {call.node.id} exceeded its timeout of {timeout:g} s")
        except Exception as exc:  # noqa: BLE001 - a failing node is an answer, not a 500
            box["error"] = as_step_error(exc)
        finally:
            _slots.release()
            from django.db import connection

            connection.close()  # a python function's queries opened this thread's connection

    worker = threading.Thread(target=work, name=f"node-test-{call.node.id}", daemon=True)
    worker.start()
    worker.join(timeout + 1.0)  # the outbound deadline ends http and llm calls by `timeout`
    if worker.is_alive():
        return None, StepTimeout(f"node {call.node.id} exceeded its timeout of {timeout:g} s "
                                 "(it is still running on the server)")
    return box.get("result"), box.get("error")
