"""Agent tool calls of an `llm` node: the tools it declares, the rounds of a conversation, the checks.

Design (docs/graph-format.md, Agent tool calls). An llm node may declare `tools`: each a name, a description, a
JSON Schema for its `parameters`, and a target, a registered python function
(`{"type": "python", "function": "..."}`) or an http call (`{"type": "http", "config": {...}}`,
whose templates read `args`). The node sends them OpenAI-style (`tools` in the chat-completions
request). When the reply asks for tool calls, the attempt does not end the step: it returns a
*round* (NodeResult.tool_round), which the runtime (workflows/runtime/tool_calls.py) commits in one
transaction with

- the round recorded in the llm step's own row (its `output` holds every round so far: the
  assistant's text, each call with its arguments, and later its result), so the model is never asked
  again for a round it answered;
- one child step per valid call (node id `tool:<llm node>:<tool>`, on the target's queue, run by any
  worker, several at once when the model asked for several), with an idempotency key made of the
  llm step's key, the round and the call id;
- the llm step parked (pending, no due time, `waiting_for_tools`) until the round's last child
  commits; that commit writes the results into the llm step's row and queues it again.

The next attempt of the llm step then sends the whole conversation (the prompt, each round's
assistant message with its `tool_calls`, a `tool` message per call) and the loop goes on until the
model answers without tool calls, or `max_tool_rounds` rounds were answered (the step fails, naming
the node). The loop breaker (`max_transitions`) counts a round as one activation for the llm step's
next attempt plus one per tool step; `max_concurrency` holds tool steps like any other.

Arguments are model output: they are checked against the tool's `parameters` schema before anything
runs, and a call that does not pass (unknown tool, bad JSON, a schema error) gets an error as its
result, which the model reads in the next round: it is never a crashed step.

Plain Python like the rest of the engine: the runtime does the storing.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from workflows.engine import limits
from workflows.engine.errors import GraphIssue, PermanentStepError
from workflows.engine.graph import Node
from workflows.engine.schema_checks import schema_problem

TOOL_PREFIX = "tool:"
# StepRun.node_id is 64 characters: `tool:<node>:<tool>` must fit.
MAX_STEP_NODE_ID = 64
DEFAULT_MAX_TOOL_ROUNDS = 8
# OpenAI's rule for function names.
NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
# What one recorded result or error keeps (a tool's output goes to the model as JSON text).
MAX_RESULT_CHARS = 20_000

# `enum` rather than `const`: the editor's browser-side checker (static/js/lib/schema-check.js) knows it.
TARGET_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "required": ["type", "function"], "additionalProperties": False,
         "properties": {"type": {"enum": ["python"]}, "function": {"type": "string", "minLength": 1}}},
        {"type": "object", "required": ["type", "config"], "additionalProperties": False,
         "properties": {"type": {"enum": ["http"]}, "config": {"type": "object"}}},
        # A tool of an MCP server (engine/nodes/mcp.py): the server is an `mcp_server` credential's name.
        {"type": "object", "required": ["type", "server", "tool"], "additionalProperties": False,
         "properties": {"type": {"enum": ["mcp"]}, "server": {"type": "string", "minLength": 1, "maxLength": 64},
                        "tool": {"type": "string", "minLength": 1, "maxLength": 128}}},
    ],
}

TOOLS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "title": "Tools the model may call (OpenAI function calling)",
    "items": {
        "type": "object",
        "required": ["name", "target"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "pattern": NAME_PATTERN},
            "description": {"type": "string"},
            "parameters": {"type": "object", "title": "JSON Schema of the arguments"},
            "target": TARGET_SCHEMA,
        },
    },
}

MAX_TOOL_ROUNDS_SCHEMA = limits.number(1, limits.MAX_TOOL_ROUNDS, integer=True,
                                       title="Most tool rounds before the step fails")


def tool_step_id(node_id: str, tool: str) -> str:
    return f"{TOOL_PREFIX}{node_id}:{tool}"


def is_tool_step(node_id: str) -> bool:
    return node_id.startswith(TOOL_PREFIX)


def split_tool_step_id(step_node_id: str) -> tuple[str, str]:
    """`tool:<node>:<tool>` -> (node, tool). Tool names hold no colon (NAME_PATTERN)."""
    node_id, _, tool = step_node_id[len(TOOL_PREFIX):].rpartition(":")
    return node_id, tool


def declared(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(tool["name"]): tool for tool in config.get("tools") or []}


def max_rounds(config: dict[str, Any]) -> int:
    return int(config.get("max_tool_rounds") or DEFAULT_MAX_TOOL_ROUNDS)


def tool_node(llm_node: Node, tool_name: str) -> Node:
    """The node a tool call's child step runs: its target, as a python or http node. Its retry
    policy and timeout are the llm node's."""
    tool = declared(llm_node.config)[tool_name]
    target = tool["target"]
    if target["type"] == "python":
        config: dict[str, Any] = {"function": target["function"]}
    elif target["type"] == "mcp":
        config = {"server": target["server"], "tool": target["tool"]}  # the call's arguments: call_config
    else:
        config = dict(target["config"])
    return Node(id=tool_step_id(llm_node.id, tool_name), type=str(target["type"]), config=config,
                retry=dict(llm_node.retry or {}), timeout_s=llm_node.timeout_s, raw=tool)


# --- Checks at save --------------------------------------------------------------------------------

def check_tools(node: Node, *, function_exists: Any, check_http: Any) -> list[GraphIssue]:
    """Tool names unique, targets that exist, parameter schemas that are schemas. `function_exists`
    (name -> bool) and `check_http` (a config -> list of problems) are passed in so this module
    need not import the other node kinds."""
    issues: list[GraphIssue] = []
    seen: set[str] = set()
    for i, tool in enumerate(node.config.get("tools") or []):
        name = str(tool.get("name", ""))
        where = f"config.tools.{i}"

        def issue(message: str, field: str = where, name: str = name) -> None:
            issues.append(GraphIssue(f"node '{node.id}', tool '{name}': {message}", node=node.id, field=field))

        if name in seen:
            issue("the name is used by another tool of this node", f"{where}.name")
        seen.add(name)
        if len(tool_step_id(node.id, name)) > MAX_STEP_NODE_ID:
            issue(f"node id and tool name together must be at most {MAX_STEP_NODE_ID - len(TOOL_PREFIX) - 1} "
                  "characters", f"{where}.name")
        parameters = tool.get("parameters")
        problem = schema_problem(parameters) if parameters is not None else None
        if problem:
            issue(f"parameters {problem}", f"{where}.parameters")
        target = tool.get("target") or {}
        if target.get("type") == "python" and not function_exists(str(target.get("function"))):
            issue(f"function '{target.get('function')}' is not registered", f"{where}.target.function")
        if target.get("type") == "http":
            for problem in check_http(target.get("config") or {}):
                issue(f"http target: {problem}", f"{where}.target.config")
    return issues


# --- The conversation -------------------------------------------------------------------------------

def openai_tools(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tools` of a chat-completions request."""
    return [{"type": "function", "function": {
        "name": tool["name"], "description": tool.get("description", ""),
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}}
        for tool in config.get("tools") or []]


def conversation(messages: list[dict[str, Any]], rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompt's messages followed by each answered round: the assistant's tool calls, then one
    `tool` message per call with its result (or error)."""
    out = list(messages)
    for rnd in rounds:
        out.append({"role": "assistant", "content": rnd.get("text"), "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c.get("arguments") or json.dumps(c.get("args"))}}
            for c in rnd["calls"]]})
        for c in rnd["calls"]:
            out.append({"role": "tool", "tool_call_id": c["id"], "content": result_text(c)})
    return out


def result_text(call: dict[str, Any]) -> str:
    if call.get("error") is not None:
        return json.dumps({"error": call["error"]})
    text = call["result"] if isinstance(call.get("result"), str) else json.dumps(call.get("result"), default=str)
    return text[:MAX_RESULT_CHARS]


def plan_round(node_id: str, config: dict[str, Any], rounds: list[dict[str, Any]],
               tool_calls: list[Any], text: str | None, usage: dict[str, Any]) -> dict[str, Any]:
    """The round the model just asked for: each call with its id, name and parsed arguments; calls
    that may not run get their error now (they get no child step). Past `max_tool_rounds`, the step
    fails, naming the node."""
    number = len(rounds) + 1
    limit = max_rounds(config)
    if number > limit:
        raise PermanentStepError(
            f"node '{node_id}' reached its limit of {limit} tool round(s) (max_tool_rounds) and the model "
            "still asks for tools", details={"node": node_id, "max_tool_rounds": limit})
    tools = declared(config)
    calls = []
    for i, raw in enumerate(tool_calls):
        raw = raw if isinstance(raw, dict) else {}
        call_id = str(raw.get("id") or f"call_{number}_{i + 1}")[:64]
        name = str(raw.get("name") or "")
        arguments = raw.get("args", raw.get("arguments"))
        entry: dict[str, Any] = {"id": call_id, "name": name}
        args, error = _parse_args(arguments)
        if isinstance(arguments, str):
            entry["arguments"] = arguments[:MAX_RESULT_CHARS]
        entry["args"] = args
        if error is None:
            tool = tools.get(name)
            if tool is None:
                error = f"unknown tool '{name}' (this node declares: {', '.join(sorted(tools)) or 'none'})"
            else:
                error = _schema_error(tool.get("parameters"), args)
        if error is not None:
            entry["error"] = error
        calls.append(entry)
    return {"round": number, "text": text, "usage": usage, "calls": calls}


def _parse_args(arguments: Any) -> tuple[Any, str | None]:
    if arguments is None:
        return {}, None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return None, f"the arguments are not valid JSON: {exc}"
    if not isinstance(arguments, dict):
        return None, "the arguments must be a JSON object"
    return arguments, None


def _schema_error(parameters: dict[str, Any] | None, args: Any) -> str | None:
    if not parameters:
        return None
    validator = jsonschema.validators.validator_for(parameters)(parameters)
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"invalid arguments{' at ' + where if where else ''}: {error.message}"


def final_output(output: dict[str, Any], rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The step's output after its last round: every call with its arguments and result, and the
    usage of all rounds."""
    if not rounds:
        return output
    # `usage` adds up the whole conversation; `call_usage` is this last call's own (tracing reports
    # each model call's tokens once: workflows/observability/genai_spans.py).
    return {**output, "tool_calls": all_calls(rounds), "tool_rounds": len(rounds),
            "usage": total_usage(rounds, output.get("usage") or {}), "call_usage": output.get("usage") or {}}


def round_done(rnd: dict[str, Any]) -> bool:
    return all("result" in c or "error" in c for c in rnd["calls"])


def all_calls(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every call of every round, flat (the step's output `tool_calls`)."""
    return [{"round": rnd["round"], **c} for rnd in rounds for c in rnd["calls"]]


def total_usage(rounds: list[dict[str, Any]], final: dict[str, Any]) -> dict[str, Any]:
    total = dict(final)
    for key in ("prompt_tokens", "completion_tokens", "cost_usd"):
        value = sum(float(r.get("usage", {}).get(key) or 0) for r in rounds) + float(final.get(key) or 0)
        total[key] = round(value, 8) if key == "cost_usd" else int(value)
    return total

