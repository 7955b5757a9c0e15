"""The graphs the store tests drive: each exercises one kind of transition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import workflows
from tests.workflows.support import edge, py

NO_JITTER = {"jitter": False}


def notes_chain(function: str, steps: int, size: int) -> dict[str, Any]:
    """`steps` python steps in a row, step i calling `function` with {"n": i, "size": size} (the state
    delta tests: each step sets context keys of that size)."""
    ids = ["start", *(f"s{i}" for i in range(1, steps + 1)), "end"]
    nodes = [{"id": "start", "type": "start"},
             *(py(f"s{i}", function, args={"n": i, "size": size}) for i in range(1, steps + 1)),
             {"id": "end", "type": "end"}]
    return {"nodes": nodes, "edges": [edge(a, b) for a, b in zip(ids, ids[1:], strict=False)],
            "settings": {"max_transitions": 100}}


def chain() -> dict[str, Any]:
    """Three python steps on one queue: the second and third run inline after the first."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("a", "storetests.step", args={"arg": "{{ input.x }}"}),
                  py("b", "storetests.step", args={"arg": "{{ steps.a.output.node }}"}),
                  py("c", "storetests.step", args={"arg": "{{ context.n }}"}),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "a"), edge("a", "b"), edge("b", "c"), edge("c", "end")],
    }


def fan_out_join() -> dict[str, Any]:
    """Three parallel branches (one on another queue) joined by a node that waits for all of them."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("a", "storetests.flaky"), py("b", "storetests.flaky", queue="io"), py("c", "storetests.flaky"),
                  py("join", "storetests.collect", args={"nodes": ["a", "b", "c"]}),
                  py("after", "storetests.step"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "a"), edge("start", "b"), edge("start", "c"),
                  edge("a", "join"), edge("b", "join"), edge("c", "join"), edge("join", "after"),
                  edge("after", "end")],
    }


def loop_any_join() -> dict[str, Any]:
    """A loop whose round fans out to a and b (on io) and joins them with `any` at m, which goes round
    (until two rounds ran) before b of its round has finished: join records of two rounds overlap."""
    m = py("m", "storetests.step", join="any")
    return {
        "nodes": [{"id": "start", "type": "start"}, py("h", "storetests.flaky"), py("a", "storetests.flaky"),
                  py("b", "storetests.flaky", queue="io"), m, {"id": "end", "type": "end"}],
        "edges": [edge("start", "h"), edge("h", "a"), edge("h", "b"), edge("a", "m"), edge("b", "m"),
                  edge("m", "h", "context.n < 2"), edge("m", "end", "context.n >= 2")],
    }


def router_loop(max_transitions: int = 7) -> dict[str, Any]:
    """count (python) -> think (scripted llm, with usage) -> check (router): back to count until n >= 4.

    Each round is three activations, so max_transitions=7 trips the loop breaker in the third round."""
    think = {"id": "think", "type": "llm", "config": {
        "provider": "scripted", "prompt": "Round {{ context.n }}",
        "script": [{"text": "more", "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.00125}}],
    }}
    check = {"id": "check", "type": "router",
             "config": {"rules": [{"when": "context.n >= 4", "route": "done"}], "default": "again"}}
    return {
        "nodes": [{"id": "start", "type": "start"}, py("count", "storetests.step"), think, check,
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "count"), edge("count", "think"), edge("think", "check"),
                  edge("check", "count", "route == 'again'"), edge("check", "end", "route == 'done'")],
        "settings": {"max_transitions": max_transitions},
    }


def budget_loop() -> dict[str, Any]:
    """The router loop with a token budget it passes in the second round (then the loop breaker trips)."""
    graph = router_loop()
    graph["settings"]["budget_tokens"] = 20
    return graph


def cost_budget_loop() -> dict[str, Any]:
    """The router loop with a cost budget of $0.002: the second llm call ($0.00125 each) passes it."""
    graph = router_loop(max_transitions=20)
    graph["settings"]["budget_usd"] = 0.002
    return graph


def timer() -> dict[str, Any]:
    """A 30 s timer between two steps: the step waits (deferred, not an attempt) until it is due."""
    return {
        "nodes": [{"id": "start", "type": "start"}, py("prep", "storetests.step"),
                  {"id": "pause", "type": "wait", "config": {"seconds": 30}},
                  py("after", "storetests.step"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "prep"), edge("prep", "pause"), edge("pause", "after"), edge("after", "end")],
    }


def retries() -> dict[str, Any]:
    """A step that fails twice (a plain exception, so its error has a traceback), then succeeds."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("a", "storetests.flaky", args={"failures": 2, "exception": True},
                     retry={"max_attempts": 3, "backoff_s": 5, **NO_JITTER}),
                  py("b", "storetests.step"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "a"), edge("a", "b"), edge("b", "end")],
    }


def lease() -> dict[str, Any]:
    """One step whose worker is lost: retried once after its lease expires."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("slow", "storetests.step", retry={"max_attempts": 1, "backoff_s": 2, **NO_JITTER}),
                  py("after", "storetests.step"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "slow"), edge("slow", "after"), edge("after", "end")],
    }


def saga() -> dict[str, Any]:
    """Two steps with compensations, then one that fails for good: both are undone, newest first."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("reserve", "storetests.step", compensate="storetests.undo"),
                  py("charge", "storetests.step", compensate={"type": "python", "queue": "io",
                                                              "config": {"function": "storetests.undo"}}),
                  py("ship", "storetests.boom"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "reserve"), edge("reserve", "charge"), edge("charge", "ship"), edge("ship", "end")],
    }


def saga_that_cannot_undo() -> dict[str, Any]:
    """The undo of a completed step fails for good: the compensation halts for a person."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("reserve", "storetests.step", compensate={"type": "python",
                                                               "config": {"function": "storetests.boom"}}),
                  py("ship", "storetests.boom"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "reserve"), edge("reserve", "ship"), edge("ship", "end")],
    }


def dead_end() -> dict[str, Any]:
    """a fans out to b and c (two successors: neither runs inline); their ways on need an output they lack."""
    return {
        "nodes": [{"id": "start", "type": "start"}, py("a", "storetests.step"), py("b", "storetests.step"),
                  py("c", "storetests.step"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "a"), edge("a", "b"), edge("a", "c"), edge("b", "end", "node == 'nobody'"),
                  edge("c", "end", "node == 'nobody'")],
    }


def human_task() -> dict[str, Any]:
    """A person approves (with an input) between two steps; a rejection ends elsewhere."""
    return {
        "nodes": [{"id": "start", "type": "start"}, py("prep", "storetests.step"),
                  {"id": "approve", "type": "human",
                   "config": {"prompt": "Pay {{ context.n }}?", "assignee_group": "operators",
                              "inputs": {"amount": {"type": "number"}}}},
                  py("pay", "storetests.step", args={"arg": "{{ steps.approve.output.amount }}"}),
                  {"id": "end", "type": "end"}, {"id": "rejected", "type": "end"}],
        "edges": [edge("start", "prep"), edge("prep", "approve"), edge("approve", "pay", "approved"),
                  edge("approve", "rejected", "not approved"), edge("pay", "end")],
    }


def short_ttl() -> dict[str, Any]:
    graph = chain()
    graph["settings"] = {"ttl_s": 60}
    return graph


def example(name: str) -> dict[str, Any]:
    """One of the shipped example workflows (workflows/examples/graphs), as its graph."""
    path = Path(workflows.__file__).parent / "examples" / "graphs" / f"{name}.json"
    raw = json.loads(path.read_text())
    return {key: raw[key] for key in ("nodes", "edges", "settings") if key in raw}


def seed_loop() -> dict[str, Any]:
    """The hallucination-loop example: two scripted llm nodes send the instance back and forth."""
    return example("seed_loop")


SUB_CHILD = "store-sub-child"


def subworkflow() -> dict[str, Any]:
    """A sub-workflow (SUB_CHILD, a two-step chain) whose output feeds the next step."""
    return {
        "nodes": [{"id": "start", "type": "start"},
                  {"id": "sub", "type": "subworkflow",
                   "config": {"workflow": SUB_CHILD, "input": {"x": "{{ input.x }}"},
                              "output": {"n": "{{ child.output.n }}"}, "save_as": "child"}},
                  py("after", "storetests.step", args={"arg": "{{ context.child.n }}"}),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "sub"), edge("sub", "after"), edge("after", "end")],
    }


def subworkflow_child() -> dict[str, Any]:
    return {
        "nodes": [{"id": "start", "type": "start"},
                  py("a", "storetests.step", args={"arg": "{{ input.x }}"}),
                  py("b", "storetests.step", args={"arg": "{{ context.n }}"}),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "a"), edge("a", "b"), edge("b", "end")],
    }
