"""What a review item is about, shown on its page: for a human task, the output of the step(s) that led
to it (what is being approved: the drafted reply, the looked-up order); for a loop-breaker halt, the
LLM replies that drove the loop, newest last. Outputs are shown as JSON, cut to a readable length."""

from __future__ import annotations

import json
from typing import Any

from workflows.engine.statuses import StepStatus
from workflows.models import ReviewItem, ReviewReason, StepRun, WorkflowInstance

MAX_LOOP_REPLIES = 8
MAX_JSON_CHARS = 4000


def evidence(item: ReviewItem, instance: WorkflowInstance) -> dict[str, Any] | None:
    """{title, steps: [{node, type, visit, text?, json}], empty?} or None for reasons it does not apply to."""
    graph = instance.version.graph if isinstance(instance.version.graph, dict) else {}
    types = {str(n.get("id")): str(n.get("type")) for n in graph.get("nodes") or [] if isinstance(n, dict)}
    done = StepRun.objects.filter(instance=instance, status=StepStatus.SUCCEEDED)
    if item.reason == ReviewReason.HUMAN_TASK:
        sources = [str(e.get("source")) for e in graph.get("edges") or []
                   if isinstance(e, dict) and e.get("target") == item.node_id]
        steps = []
        for source in dict.fromkeys(sources):
            step = done.filter(node_id=source).order_by("-visit", "-id").first()
            if step is not None and types.get(source) != "start":
                steps.append(step)
        return {"title": "What led here", "steps": [_step(s, types) for s in steps],
                "empty": "No step ran before this task: it works on the instance's input (below)."}
    if item.reason == ReviewReason.LOOP_BREAKER:
        path = [str(node) for node in (item.details or {}).get("path") or []]
        llm_nodes = [n for n in dict.fromkeys(path) if types.get(n) == "llm"] or \
            [n for n, t in types.items() if t == "llm"]
        replies = list(done.filter(node_id__in=llm_nodes).order_by("-id")[:MAX_LOOP_REPLIES])
        return {"title": "The LLM replies that drove the loop", "steps": [_step(s, types) for s in reversed(replies)],
                "empty": "No LLM step on the loop: its path and visit counts are above."}
    return None


def _step(step: StepRun, types: dict[str, str]) -> dict[str, Any]:
    output = step.output
    text = json.dumps(output, indent=2, sort_keys=True, default=str)
    out: dict[str, Any] = {"node": step.node_id, "type": types.get(step.node_id, ""), "visit": step.visit,
                           "json": text if len(text) <= MAX_JSON_CHARS else text[:MAX_JSON_CHARS] + "\n…"}
    if isinstance(output, dict):
        said = output.get("text") or output.get("content")
        if isinstance(said, str) and said:
            out["text"] = said
        if isinstance(output.get("route"), str):
            out["route"] = output["route"]
    return out
