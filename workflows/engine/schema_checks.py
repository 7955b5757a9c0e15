"""JSON Schemas a graph carries, checked against their metaschema at save.

A graph holds schemas a designer (or a planner's model) typed: a human node's declared `inputs` (one
schema per answer field), an llm tool's `parameters`, the workflow's start `input` (a bounded subset,
engine/inputs.py). Each is checked with its draft's metaschema (`validator_for(...).check_schema`,
patterns compiled too), so a schema that would make jsonschema raise `SchemaError` later (on the
review page, at an approval, on a tool call) is refused when the graph is saved, naming the node and
the field. References must stay inside the schema (`#...`): a remote `$ref` would have the validator
resolve a URL a designer chose.

Plain Python, no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from workflows.engine.errors import GraphIssue

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a usable JSON Schema, or None. Checked against the metaschema of the draft
    it names (`$schema`; 2020-12 when it names none)."""
    if not isinstance(schema, dict | bool):
        return "is not a valid JSON Schema: it must be an object (or true/false)"
    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"is not a valid JSON Schema{f' (at {where})' if where else ''}: {exc.message}"
    except RecursionError:
        return "is not a valid JSON Schema: it is nested too deeply"
    for key, value in _walk(schema):
        if key in _REF_KEYS and isinstance(value, str) and not value.startswith("#"):
            return f"uses a reference outside itself ({value[:100]}): only local references (#/...) are allowed"
        if key == "pattern" and isinstance(value, str):
            try:
                re.compile(value)
            except re.error as exc:
                return f"is not a valid JSON Schema: pattern {value[:100]!r} is not a regular expression ({exc})"
    return None


def _walk(schema: Any) -> Iterable[tuple[str, Any]]:
    """Every (key, value) pair in the schema, iteratively (graphs are depth-bounded already)."""
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                yield str(key), value
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def human_inputs_issues(node_id: str, config: Any, prefix: str = "config") -> list[GraphIssue]:
    """A human node's declared inputs: each one a schema."""
    inputs = config.get("inputs") if isinstance(config, dict) else None
    if not isinstance(inputs, dict):
        return []
    issues = []
    for name, schema in inputs.items():
        problem = schema_problem(schema)
        if problem:
            field = f"{prefix}.inputs.{name}"
            issues.append(GraphIssue(f"node '{node_id}': {field} {problem}", node=node_id, field=field))
    return issues
