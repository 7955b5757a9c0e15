"""What a valid graph still cannot do in this deployment: checks that need the deployment's settings,
which the graph's own validation (validation.py) does not see.

An llm node that names no provider, no provider credential and no script calls the deployment's
default provider; where none is configured that is the scripted provider, which has nothing to answer
with, so the step fails at run time. The editor's Validate (and the API's) says so before a run does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.errors import GraphIssue


def runnable_issues(graph: Any, default_provider: str) -> list[GraphIssue]:
    """An issue per node of `graph` that cannot run with `default_provider` as the LLM default."""
    if not isinstance(graph, Mapping) or default_provider != "scripted":
        return []
    issues = []
    for node in graph.get("nodes") or []:
        if not isinstance(node, Mapping) or node.get("type") != "llm":
            continue
        config = node.get("config")
        config = config if isinstance(config, Mapping) else {}
        if config.get("provider") or config.get("credential") or config.get("script"):
            continue  # its own provider (an explicit scripted one without a script: validation says so)
        node_id = str(node.get("id"))
        issues.append(GraphIssue(
            f"node '{node_id}' cannot run here: it names no provider and this deployment has none configured "
            "(STEADYFLOW_LLM_API_KEY or STEADYFLOW_LLM_BASE_URL), so it would use the scripted provider, "
            "which needs a script: pick a provider credential, or give it a script",
            node=node_id, field="config.provider"))
    return issues
