"""What the runtime reads from settings and from stored versions, in one place.

Settings are read through `conf()` so tests that override STEADYFLOW see the change; the engine
config and parsed graphs are cached per process (versions are immutable).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings

from workflows.engine.deltas import to_json
from workflows.engine.errors import PayloadTooLarge
from workflows.engine.event_kinds import COMPENSATE_PREFIX as COMPENSATE_PREFIX  # re-exported for the runtime
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes import EngineConfig, NodeKind, known_kinds
from workflows.engine.nodes.llm_tools import TOOL_PREFIX, split_tool_step_id, tool_node

TRAIL_LENGTH = 50


def conf(name: str) -> Any:
    return settings.STEADYFLOW[name]


@lru_cache(maxsize=1)
def engine_config() -> EngineConfig:
    return EngineConfig(
        http_allowlist=tuple(conf("HTTP_ALLOWLIST")),
        llm_base_url=conf("LLM_BASE_URL"),
        llm_api_key=conf("LLM_API_KEY"),
        llm_default_provider=conf("LLM_DEFAULT_PROVIDER"),
        llm_max_per_provider=conf("LLM_MAX_PER_PROVIDER"),
        mcp_max_per_server=conf("MCP_MAX_PER_SERVER"),
        mcp_timeout_s=conf("MCP_TIMEOUT_S"),
        mcp_server_limits=tuple(
            (str(name), int(spec.get("max_concurrent", conf("MCP_MAX_PER_SERVER"))),
             float(spec.get("timeout_s", conf("MCP_TIMEOUT_S"))))
            for name, spec in (conf("MCP_SERVER_LIMITS") or {}).items() if isinstance(spec, dict)),
        llm_prices=settings.STEADYFLOW.get("LLM_PRICES", {}),
        default_timeout_s=conf("DEFAULT_STEP_TIMEOUT_S"),
    )


@lru_cache(maxsize=256)
def graph_for_version(version_id: int) -> Graph:
    """Versions are immutable, so each process parses a version's graph once."""
    from workflows.models import WorkflowVersion

    graph: Graph = WorkflowVersion.objects.only("graph").get(pk=version_id).as_graph()
    return graph


def queue_for(node: Node, kind: NodeKind) -> str:
    return node.queue or kind.default_queue


def is_compensation(node_id: str) -> bool:
    return node_id.startswith(COMPENSATE_PREFIX)


def compensation_node(node: Node) -> Node | None:
    """The action that undoes a node's effect (saga), as a node of its own; None if it declares none.

    `compensate` is a python function name, or {"type", "config", "retry", "timeout_s", "queue"}.
    """
    spec = node.compensate
    if not spec:
        return None
    if isinstance(spec, str):
        spec = {"type": "python", "config": {"function": spec}}
    return Node(id=COMPENSATE_PREFIX + node.id, type=spec.get("type", "python"),
                config=dict(spec.get("config") or {}), queue=spec.get("queue") or node.queue,
                retry=dict(spec.get("retry") or {"max_attempts": 3}), timeout_s=spec.get("timeout_s"), raw=spec)


def node_for_step(graph: Graph, node_id: str) -> Node:
    if node_id.startswith(TOOL_PREFIX):
        # An llm node's tool call (workflows/runtime/tool_calls.py): its tool's target.
        llm_node_id, tool = split_tool_step_id(node_id)
        return tool_node(graph.nodes[llm_node_id], tool)
    if is_compensation(node_id):
        node = compensation_node(graph.nodes[node_id[len(COMPENSATE_PREFIX):]])
        assert node is not None
        return node
    return graph.nodes[node_id]


def child_kinds() -> frozenset[str]:
    """The node types whose steps start children and wait for them: subworkflow, planner."""
    return frozenset(name for name, kind in known_kinds().items() if kind.starts_children)


@lru_cache(maxsize=1)
def person_kinds() -> tuple[str, ...]:
    """Node types whose steps wait for a person (human tasks), not for a worker."""
    return tuple(name for name, kind in known_kinds().items() if kind.awaits_person)


def check_payload(what: str, value: Any) -> str:
    """Refuse a payload over STEADYFLOW_MAX_PAYLOAD_BYTES; returns its JSON so it is not serialised twice."""
    text = to_json(value)
    check_payload_size(what, len(text))
    return text


def check_payload_size(what: str, size: int) -> None:
    limit = conf("MAX_PAYLOAD_BYTES")
    if size > limit:
        raise PayloadTooLarge(f"{what} is {size} bytes, over the limit of {limit} bytes "
                              "(STEADYFLOW_MAX_PAYLOAD_BYTES)")
