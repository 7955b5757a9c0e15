"""The planner's prompt and the strict reading of its reply: plain Python, no LLM call here.

A designer (or a `planner` node) states an objective; `build_messages` turns it, the node kinds the
engine knows and the registered python functions into chat messages asking for one JSON graph, and
`parse_plan` reads the model's reply back into a graph document. The reply is untrusted text: it is
parsed with strict_json (no NaN, no huge integers, bounded depth), bounded in size, and must be a graph
object; whether that graph can run is engine validation's job (validation.validate_graph, which names
the node of every problem: a cycle, an unknown function, a missing end).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.engine import limits, strict_json

MAX_OBJECTIVE_CHARS = 4_000
MAX_REPLY_CHARS = 200_000  # a 1,000-node graph fits; anything longer is refused before parsing
MAX_FUNCTIONS_LISTED = 200  # the prompt stays bounded whatever a deployment registers
MAX_DOC_CHARS = 200
# Kinds a plan may not use: a plan that plans again, or a sub-workflow a model picks by slug, would let
# one objective start unbounded work the designer never saw.
EXCLUDED_KINDS = frozenset({"planner", "subworkflow"})

SYSTEM_PROMPT = """You design workflow graphs for Steadyflow. Reply with ONE JSON object and nothing else \
(no prose, no code fences). Its shape:
{{"nodes": [{{"id": "start", "type": "start"}}, ..., {{"id": "done", "type": "end"}}],
 "edges": [{{"source": "start", "target": "..."}}, {{"source": "a", "target": "b", "when": "route == 'x'"}}],
 "settings": {{"max_transitions": 50}}}}
Rules: exactly one node of type "start" and at least one of type "end"; every other node needs an outgoing \
edge; every node is reachable from start; a cycle must pass through a conditional edge ("when") or a \
router node; node ids are short lowercase words; each node's "config" follows its type's fields; at most \
{max_nodes} nodes. A "python" node may only call these registered functions (config "function"):
{functions}
Node types (type: required config fields; optional fields):
{kinds}"""


class PlanRejected(ValueError):
    """A reply that is not a usable graph document; str() says why (shown to the designer)."""


@dataclass(frozen=True)
class KindSummary:
    name: str
    label: str
    required: tuple[str, ...]
    optional: tuple[str, ...]


def summarize_kinds(described: Iterable[Mapping[str, Any]]) -> list[KindSummary]:
    """The node kinds a plan may use, from NodeKind.describe() dicts (what /api/node-types serves)."""
    out = []
    for kind in described:
        name = str(kind.get("name"))
        if name in EXCLUDED_KINDS:
            continue
        schema = kind.get("schema") or {}
        properties = schema.get("properties") or {}
        required = tuple(str(k) for k in schema.get("required") or ())
        optional = tuple(str(k) for k in properties if k not in required and k != "script")
        out.append(KindSummary(name=name, label=str(kind.get("label") or name), required=required,
                               optional=optional))
    return out


def build_messages(objective: str, kinds: Iterable[KindSummary], functions: Iterable[Mapping[str, str]],
                   max_nodes: int = limits.MAX_NODES) -> list[dict[str, str]]:
    """The chat messages asking for a graph that meets `objective`. Raises PlanRejected for an empty or
    over-long objective."""
    objective = objective.strip()
    if not objective:
        raise PlanRejected("the objective is empty: say what the workflow should do")
    if len(objective) > MAX_OBJECTIVE_CHARS:
        raise PlanRejected(f"the objective is too long ({len(objective)} characters, "
                           f"{MAX_OBJECTIVE_CHARS} at most)")
    listed = list(functions)[:MAX_FUNCTIONS_LISTED]
    function_lines = "\n".join(f"- {f['name']}: {(f.get('doc') or '')[:MAX_DOC_CHARS]}".rstrip(": ")
                               for f in listed) or "- (none registered: do not use python nodes)"
    kind_lines = "\n".join(
        f"- {k.name} ({k.label}): {', '.join(k.required) or '-'}; {', '.join(k.optional) or '-'}" for k in kinds)
    system = SYSTEM_PROMPT.format(max_nodes=max_nodes, functions=function_lines, kinds=kind_lines)
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Objective: {objective}"}]


def parse_plan(text: str | None, max_nodes: int = limits.MAX_NODES) -> dict[str, Any]:
    """The graph document in the model's reply. Tolerates one surrounding ```json fence (models add it
    whatever they are told) and nothing else. Raises PlanRejected naming the problem."""
    if text is None or not text.strip():
        raise PlanRejected("the model's reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise PlanRejected(f"the model's reply is too long ({len(text)} characters, {MAX_REPLY_CHARS} at most)")
    body = _unfenced(text.strip())
    try:
        graph = strict_json.loads(body, what="the model's reply")
    except strict_json.JSONRejected as exc:
        raise PlanRejected(str(exc)) from None
    if not isinstance(graph, dict):
        raise PlanRejected("the model's reply is not a JSON object with 'nodes' and 'edges'")
    nodes, edges = graph.get("nodes"), graph.get("edges")
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise PlanRejected("the model's reply needs a 'nodes' list and an 'edges' list")
    if len(nodes) > max_nodes:
        raise PlanRejected(f"the plan has {len(nodes)} nodes, {max_nodes} at most")
    if len(edges) > limits.MAX_EDGES:
        raise PlanRejected(f"the plan has {len(edges)} edges, {limits.MAX_EDGES} at most")
    for node in nodes:
        if isinstance(node, dict) and node.get("type") in EXCLUDED_KINDS:
            raise PlanRejected(f"node '{node.get('id')}': a plan may not use a {node['type']} node")
    # Only the graph document's own keys: a reply's extra keys (a model's "explanation") are dropped.
    return {key: graph[key] for key in ("nodes", "edges", "settings", "input", "name", "description")
            if key in graph}


def plan_issues_text(issues: Iterable[Any]) -> str:
    """One line naming the first problems of a refused plan (for errors and step outputs)."""
    listed = [str(issue) for issue in issues]
    more = f" (and {len(listed) - 3} more)" if len(listed) > 3 else ""
    return "; ".join(listed[:3]) + more


def _unfenced(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        inner = text[3:-3]
        first_line, _, rest = inner.partition("\n")
        # ```json\n{...}\n``` -> {...}; the fence's language word is the only thing dropped.
        return rest if first_line.strip().isalpha() or not first_line.strip() else inner
    return text


def usage_of(raw: Mapping[str, Any], model: str, prices: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Tokens and cost of one planning call, priced like an llm node's (EngineConfig.llm_prices)."""
    prompt_tokens = int(raw.get("prompt_tokens") or 0)
    completion_tokens = int(raw.get("completion_tokens") or 0)
    price = prices.get(model) or prices.get("*") or {}
    cost = raw.get("cost_usd")
    if cost is None:
        cost = (prompt_tokens * float(price.get("prompt_per_1k", 0))
                + completion_tokens * float(price.get("completion_per_1k", 0))) / 1000
    return {"model": model, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "cost_usd": round(float(cost), 8)}

