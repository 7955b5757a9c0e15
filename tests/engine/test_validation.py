"""validate_graph: one test per message it can produce; every issue names its node or edge."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import graph
from workflows.engine.errors import GraphInvalid, GraphIssue
from workflows.engine.graph import Graph
from workflows.engine.nodes import known_kinds
from workflows.engine.validation import ensure_valid, unconditional_cycle, validate_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows" / "examples" / "graphs"


def messages(data: Any) -> list[str]:
    return [issue.message for issue in validate_graph(data)]


def only_issue(data: Any) -> GraphIssue:
    issues = validate_graph(data)
    assert len(issues) == 1, [i.as_dict() for i in issues]
    return issues[0]


def around(node: dict[str, Any]) -> dict[str, Any]:
    """A valid start -> node -> done frame around one node."""
    return graph(["start:start", node, "done:end"], [("start", node["id"]), (node["id"], "done")])


VALID_LLM = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "Hi {{ context.name }}",
                                                      "script": [{"text": "hello"}]}}


def test_a_minimal_graph_is_valid() -> None:
    data = around(VALID_LLM)
    assert validate_graph(data) == []
    built = ensure_valid(data)
    assert isinstance(built, Graph)
    assert built.start_node == "start"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_every_example_graph_validates(path: Path) -> None:
    data = json.loads(path.read_text())
    assert [i.as_dict() for i in validate_graph(data)] == []


def test_there_are_eight_example_graphs() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.json")) == [
        "order_desk", "planner_demo", "react_agent", "refund_saga", "research_agent", "research_report", "seed_loop",
        "support_desk"]


def test_ensure_valid_raises_with_every_issue() -> None:
    data = graph(["start:start", "done:end", "lonely"], [("start", "done")])
    with pytest.raises(GraphInvalid) as info:
        ensure_valid(data)
    assert [i.node for i in info.value.issues] == ["lonely", "lonely"]
    assert "node 'lonely' is unreachable from the start node" in str(info.value)


# --- JSON shape ------------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [[], "graph", None, 3])
def test_graph_must_be_an_object(data: Any) -> None:
    issue = only_issue(data)
    assert issue.message == "the graph must be a JSON object with 'nodes' and 'edges'"
    assert issue.as_dict() == {"message": issue.message}


@pytest.mark.parametrize("data", [{}, {"nodes": []}, {"nodes": {"a": 1}}, {"nodes": "start"}])
def test_nodes_must_be_a_non_empty_list(data: Any) -> None:
    assert messages(data) == ["'nodes' must be a non-empty list"]


def test_edges_must_be_a_list() -> None:
    assert messages({"nodes": [{"id": "start", "type": "start"}], "edges": {}}) == ["'edges' must be a list"]


def test_settings_are_checked_against_their_schema() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["settings"] = {"max_transitions": 0, "ttl_s": 0, "budget_usd": -1, "surprise": True}
    issues = validate_graph(data)
    by_field = {i.field: i.message for i in issues}
    assert by_field == {
        "settings": "settings: Additional properties are not allowed ('surprise' was unexpected)",
        "settings.max_transitions": "settings.max_transitions: 0 is less than the minimum of 1",
        "settings.ttl_s": "settings.ttl_s: 0 is less than or equal to the minimum of 0",
        "settings.budget_usd": "settings.budget_usd: -1 is less than the minimum of 0",
    }
    assert all(i.node is None and i.edge is None for i in issues)


def test_valid_settings_pass() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")], max_transitions=5, ttl_s=60,
                 max_concurrency=2, budget_usd=0.5, budget_tokens=1000)
    assert validate_graph(data) == []
    assert Graph.from_json(data).settings.budget_tokens == 1000


# --- Nodes -----------------------------------------------------------------------------------------

def test_a_node_must_be_an_object() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["nodes"].insert(1, "oops")
    issue = only_issue(data)
    assert issue.message == "node 2 must be an object"
    assert issue.node == "#2"


def test_node_shape_missing_type_names_the_node() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["nodes"].append({"id": "x"})
    issues = validate_graph(data)
    assert issues[0].as_dict() == {"message": "node 'x': node: 'type' is a required property", "node": "x",
                                   "field": "node"}
    # In the same pass: the malformed node still takes part in the structural checks.
    assert [i.message for i in issues[1:]] == [
        "node 'x' is unreachable from the start node",
        "node 'x' has no outgoing edge: every path must reach an end node"]


def test_node_shape_id_not_a_string_is_named_by_position() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["nodes"].append({"id": 5, "type": "end"})
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "node '#3': node.id: 5 is not of type 'string'", "node": "#3",
                               "field": "node.id"}


@pytest.mark.parametrize(("extra", "field", "text"), [
    ({"queue": "gpu"}, "node.queue", "'gpu' is not one of ['ai', 'io', 'default']"),
    ({"join": "some"}, "node.join", "'some' is not one of ['all', 'any']"),
    ({"timeout_s": 0}, "node.timeout_s", "0 is less than or equal to the minimum of 0"),
    ({"retry": {"max_attempts": 0}}, "node.retry.max_attempts", "0 is less than the minimum of 1"),
    ({"retry": {"tries": 3}}, "node.retry", "Additional properties are not allowed ('tries' was unexpected)"),
    ({"fallback": {"route": "x"}}, "node.fallback", "'mode' is a required property"),
    ({"fallback": {"mode": "guess"}}, "node.fallback.mode", "'guess' is not one of ['rule', 'review']"),
    ({"config": "prompt"}, "node.config", "'prompt' is not of type 'object'"),
])
def test_node_shape_fields(extra: dict[str, Any], field: str, text: str) -> None:
    node = {**copy.deepcopy(VALID_LLM), **extra}
    issue = only_issue(around(node))
    assert issue.as_dict() == {"message": f"node 'ask': {field}: {text}", "node": "ask", "field": field}


def test_a_malformed_node_is_not_reported_again_as_missing_from_its_edges() -> None:
    # The edges name 'ask', which exists but is malformed: one issue, not three.
    issue = only_issue(around({**copy.deepcopy(VALID_LLM), "queue": "gpu"}))
    assert issue.field == "node.queue"


@pytest.mark.parametrize("bad_id", ["1abc", "has space", "dot.ted", "", "x" * 65, "colon:id"])
def test_bad_node_id(bad_id: str) -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["nodes"].append({"id": bad_id, "type": "end"})
    data["edges"].append({"source": "start", "target": bad_id})
    issue = only_issue(data)
    assert issue.message == (f"node '{bad_id}': id must start with a letter or _ and hold only letters, "
                             "digits, _ and - (64 at most)")
    assert (issue.node, issue.field) == (bad_id, "id")


@pytest.mark.parametrize("good_id", ["a", "_private", "with-dash_and_9", "x" * 64])
def test_good_node_ids(good_id: str) -> None:
    assert validate_graph(around({"id": good_id, "type": "python", "config": {"function": "noop"}})) == []


def test_duplicate_node_id() -> None:
    data = graph(["start:start", "done:end", "done:end"], [("start", "done")])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "node 'done': duplicate id", "node": "done", "field": "id"}


def test_unknown_node_type_lists_the_known_ones() -> None:
    issue = only_issue(around({"id": "t", "type": "teleport"}))
    known = ", ".join(sorted(known_kinds()))
    assert issue.message == f"node 't': unknown node type 'teleport' (known: {known})"
    assert (issue.node, issue.field) == ("t", "type")
    for kind in ("end", "http", "human", "llm", "python", "router", "start", "wait"):
        assert kind in known


# --- Each kind's config against its JSON Schema ------------------------------------------------------

CONFIG_CASES = [
    # (kind, config, field, message after "node 'n': <field>: ")
    ("start", {"x": 1}, "config", "Additional properties are not allowed ('x' was unexpected)"),
    ("end", {"status": "failed"}, "config.status", "'failed' is not one of ['completed']"),
    ("python", {}, "config", "'function' is a required property"),
    ("python", {"function": "noop", "code": "import os"}, "config",
     "Additional properties are not allowed ('code' was unexpected)"),
    ("python", {"function": ""}, "config.function", "'' should be non-empty"),
    ("router", {}, "config", "'rules' is a required property"),
    ("router", {"rules": [{"when": "x"}]}, "config.rules.0", "'route' is a required property"),
    ("router", {"rules": [{"when": "", "route": "a"}]}, "config.rules.0.when", "'' should be non-empty"),
    ("llm", {}, "config", "'prompt' is a required property"),
    ("llm", {"prompt": "p", "provider": "claude"}, "config.provider",
     "'claude' is not one of ['openai', 'anthropic', 'gemini', 'scripted']"),
    ("llm", {"prompt": "p", "temperature": 3}, "config.temperature", "3 is greater than the maximum of 2"),
    ("llm", {"prompt": "p", "routes": ["a", "a"]}, "config.routes", "['a', 'a'] has non-unique elements"),
    ("llm", {"prompt": "p", "script": [{"txt": "x"}]}, "config.script.0",
     "Additional properties are not allowed ('txt' was unexpected)"),
    ("http", {}, "config", "'url' is a required property"),
    ("http", {"url": "http://x", "method": "TRACE"}, "config.method",
     "'TRACE' is not one of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']"),
    ("http", {"url": "http://x", "headers": {"X-N": 1}}, "config.headers.X-N", "1 is not of type 'string'"),
    ("wait", {}, "config", "needs exactly one of: seconds, until"),
    ("wait", {"seconds": 1, "until": "2030-01-01T00:00:00+00:00"}, "config",
     "needs exactly one of: seconds, until"),
    ("wait", {"seconds": -1}, "config.seconds", "-1 is less than the minimum of 0"),
    ("human", {}, "config", "'prompt' is a required property"),
    ("human", {"prompt": "ok?", "inputs": {"amount": 5}}, "config.inputs.amount", "5 is not of type 'object'"),
]


@pytest.mark.parametrize(("kind", "config", "field", "text"), CONFIG_CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CONFIG_CASES)])
def test_config_is_checked_against_the_kinds_schema(kind: str, config: dict[str, Any], field: str,
                                                     text: str) -> None:
    if kind in ("start", "end"):
        nodes = [{"id": "n", "type": kind, "config": config},
                 *(["done:end"] if kind == "start" else ["start:start"])]
        data = graph(nodes, [("n", "done")] if kind == "start" else [("start", "n")])
    else:
        data = around({"id": "n", "type": kind, "config": config})
    issues = validate_graph(data)
    assert [i.as_dict() for i in issues] == [{"message": f"node 'n': {field}: {text}", "node": "n",
                                              "field": field}]


@pytest.mark.parametrize(("kind", "config"), [
    ("python", {"function": "noop", "args": {"x": "{{ context.x }}"}}),
    ("router", {"rules": [{"when": "context.x > 1", "route": "big"}], "default": "small"}),
    ("llm", {"prompt": "p", "model": "m", "temperature": 0.2, "max_tokens": 10, "save_as": "answer"}),
    ("http", {"url": "https://example.com/{{ context.id }}", "method": "POST", "json": {"a": [1]},
              "headers": {"X-A": "b"}, "params": {"q": 1}, "timeout_s": 2}),
    ("wait", {"seconds": 0}),
    ("wait", {"until": "{{ context.when }}"}),
    ("human", {"prompt": "Approve {{ context.amount }}?", "assignee_group": "ops",
               "inputs": {"approved": {"type": "boolean"}}}),
])
def test_valid_configs_of_each_kind(kind: str, config: dict[str, Any]) -> None:
    assert [i.as_dict() for i in validate_graph(around({"id": "n", "type": kind, "config": config}))] == []


def test_a_template_that_does_not_parse_names_the_node() -> None:
    node = {"id": "ask", "type": "llm", "config": {"prompt": "Hi {{ context. }}"}}
    issue = only_issue(around(node))
    assert issue.as_dict() == {"message": "node 'ask': template does not parse: invalid syntax in 'context.'",
                               "node": "ask", "field": "config"}


def test_templates_are_checked_deep_inside_config() -> None:
    node = {"id": "call", "type": "http", "config": {"url": "https://x", "json": {"a": ["{{ __import__ }}"]}}}
    issue = only_issue(around(node))
    assert issue.message == "node 'call': template name '__import__' is not allowed in '__import__'"


def test_raw_config_keys_are_not_template_checked() -> None:
    # A router's rules are conditions, not templates; a scripted reply may contain braces.
    node = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "p",
                                                    "script": [{"text": "{{ not a template"}]}}
    assert validate_graph(around(node)) == []


def test_rule_fallback_needs_a_route_or_an_output() -> None:
    node = {**copy.deepcopy(VALID_LLM), "fallback": {"mode": "rule"}}
    issue = only_issue(around(node))
    assert issue.as_dict() == {"message": "node 'ask': a rule fallback needs a route or an output",
                               "node": "ask", "field": "fallback"}
    for fallback in ({"mode": "rule", "route": "x"}, {"mode": "rule", "output": "canned"}, {"mode": "review"}):
        assert validate_graph(around({**copy.deepcopy(VALID_LLM), "fallback": fallback})) == []


# --- Edges -----------------------------------------------------------------------------------------

def test_an_edge_must_be_an_object() -> None:
    data = graph(["start:start", "done:end"], [("start", "done")])
    data["edges"].append(["start", "done"])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "edge 2 must be an object", "edge": 1}


@pytest.mark.parametrize(("edge", "field", "text"), [
    ({"source": "start"}, "edge", "'target' is a required property"),
    ({"target": "done"}, "edge", "'source' is a required property"),
    ({"source": "start", "target": 3}, "edge.target", "3 is not of type 'string'"),
    ({"source": "start", "target": "done", "when": True}, "edge.when", "True is not of type 'string', 'null'"),
])
def test_edge_shape(edge: dict[str, Any], field: str, text: str) -> None:
    data = graph(["start:start", "done:end"], [("start", "done"), edge])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": f"edge 2: {field}: {text}", "edge": 1, "field": field}


def test_dangling_source_and_target() -> None:
    data = graph(["start:start", "done:end"], [("start", "done"), ("ghost", "done"), ("start", "nowhere")])
    assert [i.as_dict() for i in validate_graph(data)] == [
        {"message": "edge 2 (ghost -> done): source 'ghost' is not a node", "edge": 1, "field": "source"},
        {"message": "edge 3 (start -> nowhere): target 'nowhere' is not a node", "edge": 2, "field": "target"},
    ]


@pytest.mark.parametrize(("when", "text"), [
    ("route ==", "condition does not parse: invalid syntax in 'route =='"),
    ("context.__class__", "condition access to '__class__' is not allowed in 'context.__class__'"),
    ("(lambda: 1)()", "condition lambda is not allowed in '(lambda: 1)()'"),
    ("   ", "condition expression is empty"),
])
def test_a_when_that_does_not_parse_names_the_edge(when: str, text: str) -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "done", when)])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": f"edge 2 (a -> done): {text}", "edge": 1, "field": "when"}


def test_an_empty_when_is_an_unconditional_edge() -> None:
    data = graph(["start:start", "done:end"], [("start", "done", "")])
    assert validate_graph(data) == []
    assert Graph.from_json(data).edges[0].when is None


def test_duplicate_edge() -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "done"), ("a", "done")])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "edge 3 (a -> done): duplicate edge", "edge": 2}


def test_same_pair_with_different_conditions_is_not_a_duplicate() -> None:
    data = graph(["start:start", "a", "done:end"],
                 [("start", "a"), ("a", "done", "context.x"), ("a", "done", "not context.x")])
    assert validate_graph(data) == []


# --- Start, end and structure ----------------------------------------------------------------------

def test_missing_start() -> None:
    issue = only_issue(graph(["a", "done:end"], [("a", "done")]))
    assert issue.message == "the graph needs exactly one start node (found none)"


def test_two_starts() -> None:
    data = graph(["s1:start", "s2:start", "done:end"], [("s1", "done"), ("s2", "done")])
    issue = only_issue(data)
    assert issue.message == "the graph needs exactly one start node (found: s1, s2)"
    assert issue.node == "s2"


def test_no_end() -> None:
    assert messages(graph(["start:start", "a"], [("start", "a")])) == [
        "the graph needs at least one end node (found none)",
        "node 'a' has no outgoing edge: every path must reach an end node"]


def test_missing_start_and_end_are_both_reported() -> None:
    assert messages(graph(["a"], [])) == ["the graph needs exactly one start node (found none)",
                                          "the graph needs at least one end node (found none)",
                                          "node 'a' has no outgoing edge: every path must reach an end node"]


def test_edge_into_start() -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "done"), ("a", "start", "context.x")])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "edge 3 (a -> start): nothing may lead into the start node",
                               "edge": 2, "node": "start"}


def test_edge_out_of_end() -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "done"), ("done", "a", "context.x")])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "edge 3 (done -> a): an end node has no outgoing edges",
                               "edge": 2, "node": "done"}


def test_unreachable_node() -> None:
    data = graph(["start:start", "a", "island", "done:end"], [("start", "a"), ("a", "done"), ("island", "done")])
    issue = only_issue(data)
    assert issue.as_dict() == {"message": "node 'island' is unreachable from the start node", "node": "island"}


def test_node_without_outgoing_edge() -> None:
    data = graph(["start:start", "a", "stuck", "done:end"], [("start", "a"), ("a", "done"), ("a", "stuck")])
    issue = only_issue(data)
    assert issue.as_dict() == {
        "message": "node 'stuck' has no outgoing edge: every path must reach an end node", "node": "stuck"}


# --- Cycles ----------------------------------------------------------------------------------------

def test_unconditional_cycle_is_named() -> None:
    data = graph(["start:start", "a", "b", "c", "done:end"],
                 [("start", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "done", "context.ok")])
    issue = only_issue(data)
    assert issue.message == ("unconditional cycle a -> b -> c -> a: every cycle must pass through a "
                             "conditional edge or a router node")
    assert issue.node == "a"


def test_self_loop_is_an_unconditional_cycle() -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "a"), ("a", "done")])
    issue = only_issue(data)
    assert issue.message.startswith("unconditional cycle a -> a:")


def test_cycle_is_named_when_a_node_behind_it_is_listed_first() -> None:
    # 'done' and 'after' lie behind the cycle and come first in the node list: naming the cycle must
    # not start from them (a forward walk from 'done' finds no way on).
    data = graph(["start:start", "done:end", "after", "a", "b"],
                 [("start", "a"), ("a", "b"), ("b", "a"), ("b", "after"), ("after", "done")])
    issue = only_issue(data)
    assert issue.message.startswith("unconditional cycle a -> b -> a:")
    assert issue.node == "a"


def test_only_the_cycle_is_named_not_the_path_into_it() -> None:
    data = graph(["start:start", "x", "y", "p", "q", "r", "done:end"],
                 [("start", "x"), ("x", "y"), ("y", "p"), ("p", "q"), ("q", "r"), ("r", "p"),
                  ("r", "done", "context.done")])
    assert unconditional_cycle(Graph.from_json(data)) == ["p", "q", "r"]


def test_cycle_through_a_conditional_edge_is_allowed() -> None:
    data = graph(["start:start", "a", "b", "done:end"],
                 [("start", "a"), ("a", "b"), ("b", "a", "context.again"), ("b", "done", "not context.again")])
    assert validate_graph(data) == []


def test_cycle_through_a_router_is_allowed() -> None:
    router = {"id": "r", "type": "router", "config": {"rules": [{"when": "context.more", "route": "a"}],
                                                      "default": "done"}}
    data = graph(["start:start", "a", router, "done:end"], [("start", "a"), ("a", "r"), ("r", "a"), ("r", "done")])
    assert validate_graph(data) == []
    assert unconditional_cycle(Graph.from_json(data)) == []


def test_a_dag_has_no_unconditional_cycle() -> None:
    data = graph(["start:start", "a", "b", "c", "done:end"],
                 [("start", "a"), ("start", "b"), ("a", "c"), ("b", "c"), ("c", "done")])
    assert unconditional_cycle(Graph.from_json(data)) == []


# --- Each kind's own checks ------------------------------------------------------------------------

def test_python_function_not_registered() -> None:
    issue = only_issue(around({"id": "fn", "type": "python", "config": {"function": "nope.missing"}}))
    assert issue.message.startswith("node 'fn': function 'nope.missing' is not registered (known: ")
    assert "noop" in issue.message and "examples.lookup_order" in issue.message
    assert (issue.node, issue.field) == ("fn", "config.function")


def test_scripted_llm_without_script() -> None:
    node = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "p"}}
    issue = only_issue(around(node))
    assert issue.as_dict() == {"message": "node 'ask': the scripted provider needs a non-empty script",
                               "node": "ask", "field": "config.script"}
    node["config"]["script"] = []
    assert only_issue(around(node)).field == "config.script"


def test_script_route_outside_routes() -> None:
    node = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "p", "routes": ["yes", "no"],
                                                    "script": [{"route": "yes"}, {"route": "maybe"}]}}
    issue = only_issue(around(node))
    assert issue.as_dict() == {
        "message": "node 'ask': script entry 2 routes to 'maybe', not one of ['yes', 'no']",
        "node": "ask", "field": "config.script.1.route"}


def test_router_rule_condition_that_does_not_parse() -> None:
    router = {"id": "r", "type": "router", "config": {"rules": [{"when": "context.x > 1", "route": "a"},
                                                                {"when": "x ===", "route": "b"}]}}
    issue = only_issue(around(router))
    assert issue.as_dict() == {"message": "node 'r': rule 2 condition does not parse: invalid syntax in 'x ==='",
                               "node": "r", "field": "config.rules.1.when"}


def test_every_issue_names_something() -> None:
    # A broken graph exercising many checks at once: each issue is about a node, an edge or settings.
    data = graph(["start:start", {"id": "bad id", "type": "end"}, {"id": "t", "type": "teleport"},
                  "done:end", "done:end"],
                 [("start", "done"), ("start", "ghost"), ("start", "done", "==")])
    data["settings"] = {"max_transitions": "many"}
    issues = validate_graph(data)
    assert len(issues) == 9  # six in the parts, three structural (reported in the same pass)
    assert all(i.node is not None or i.edge is not None or i.field == "settings.max_transitions" for i in issues)


# --- One pass ---------------------------------------------------------------------------------------

def test_config_errors_do_not_hide_structural_ones() -> None:
    # A bad config, an unconditional cycle and a dead end: all reported at once.
    data = graph(["start:start", {"id": "a", "type": "python", "config": {}}, "b", "c", "done:end"],
                 [("start", "a"), ("a", "b"), ("b", "a"), ("a", "done"), ("start", "c")])
    found = messages(data)
    assert "node 'a': config: 'function' is a required property" in found
    assert "unconditional cycle a -> b -> a: every cycle must pass through a conditional edge or a router node" \
        in found
    assert "node 'c' has no outgoing edge: every path must reach an end node" in found


def test_a_condition_that_does_not_parse_still_counts_as_conditional() -> None:
    # The cycle passes through a conditional edge: only the condition is wrong, no cycle is reported.
    data = graph(["start:start", "a", "b", "done:end"],
                 [("start", "a"), ("a", "b", "x =="), ("b", "a"), ("a", "done", "context.ok")])
    assert messages(data) == ["edge 2 (a -> b): condition does not parse: invalid syntax in 'x =='"]


# --- Route literals in conditions ---------------------------------------------------------------------

def _routed(when: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
    source = source or {"id": "classify", "type": "llm", "config": {
        "provider": "scripted", "prompt": "p", "routes": ["fetch", "reply"], "script": [{"route": "fetch"}]}}
    return graph(["start:start", source, "fetch", "done:end"],
                 [("start", "classify"), ("classify", "fetch", when), ("classify", "done", "route == 'reply'"),
                  ("fetch", "done")])


@pytest.mark.parametrize("when", ["route == 'fetc'", "'fetc' == route", "route != 'fetc'",
                                  "route in ['fetch', 'fetc']", "route not in ('fetc',)",
                                  "output.route == 'fetc'", "context.x and route == 'fetc'"])
def test_a_route_typo_names_the_edge(when: str) -> None:
    issue = only_issue(_routed(when))
    assert issue.as_dict() == {
        "message": "edge 2 (classify -> fetch): condition tests route 'fetc', but node 'classify' routes only "
                   "to fetch, reply", "edge": 1, "field": "when"}


@pytest.mark.parametrize("when", ["route == 'fetch'", "route in ['fetch', 'reply']", "route == context.next",
                                  "context.route == 'anything'"])
def test_declared_or_computed_routes_pass(when: str) -> None:
    assert messages(_routed(when)) == []


def test_router_routes_are_its_rules_and_default() -> None:
    router = {"id": "classify", "type": "router",
              "config": {"rules": [{"when": "context.x", "route": "fetch"}], "default": "reply"}}
    assert messages(_routed("route == 'fetch'", router)) == []
    assert messages(_routed("route == 'defalt'", router)) == [
        "edge 2 (classify -> fetch): condition tests route 'defalt', but node 'classify' routes only to "
        "fetch, reply"]


def test_an_llm_without_routes_is_not_checked() -> None:
    free = {"id": "classify", "type": "llm", "config": {"provider": "scripted", "prompt": "p",
                                                          "script": [{"text": "x", "route": "fetch"}]}}
    assert messages(_routed("route == 'fetch'", free)) == []


# --- The declared start input -------------------------------------------------------------------------

def with_input(schema: Any) -> dict[str, Any]:
    return {**around(VALID_LLM), "input": schema}


def test_a_declared_input_is_valid() -> None:
    assert messages(with_input({"type": "object", "required": ["amount"], "properties": {
        "amount": {"type": "number", "description": "in EUR", "default": 10, "examples": [10, 99.5]},
        "tags": {"type": "array", "items": {"type": "string"}, "default": []},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }})) == []


@pytest.mark.parametrize(("schema", "text"), [
    ([], "input: [] is not of type 'object'"),
    ({"type": "array"}, "input.type: 'object' was expected"),
    ({"type": "object", "properties": {"a": {"type": "float"}}}, "input.properties.a.type: 'float' is not one of"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a+)+$"}}},
     "input.properties.a: Additional properties are not allowed ('pattern' was unexpected)"),
    ({"type": "object", "properties": {"a": {"type": "number", "default": "ten"}}},
     "input.a.default: must be a number"),
    ({"type": "object", "properties": {"a": {"type": "integer", "examples": [1, 2.5]}}},
     "input.a.examples.1: must be a whole number"),
    ({"type": "object", "required": ["b"], "properties": {"a": {"type": "string"}}},
     "input: required field 'b' is not declared"),
    ({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(201)}},
     "input.properties: {"),
])
def test_a_bad_input_schema_is_a_validation_error_naming_input(schema: Any, text: str) -> None:
    issues = validate_graph(with_input(schema))
    assert issues and all(i.field and i.field.startswith("input") for i in issues), issues
    assert any(i.message.startswith(text) for i in issues), [i.message for i in issues]


def test_input_schema_depth_and_size_are_bounded() -> None:
    field: dict[str, Any] = {"type": "string"}
    for _ in range(9):
        field = {"type": "object", "properties": {"x": field}}
    assert messages(with_input({"type": "object", "properties": {"x": field}})) == [
        "input: fields are nested too deeply (8 levels at most)"]
    big = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x" * 1000] * 70}}}
    assert messages(with_input(big))[0].startswith("input: the schema is too large")
