"""A workflow's start input: the JSON Schema a definition declares under the graph's `input` key.

    "input": {"type": "object",
              "properties": {"amount": {"type": "number", "description": "...", "default": 10,
                                        "examples": [10, 250]}},
              "required": ["amount"]}

`schema_issues` checks the declared schema itself at save (a small, bounded subset of JSON Schema:
no `pattern`, no `$ref`, so nothing a designer types can make a start expensive); `prepare_input`
fills in defaults and validates a start input against it at every start (the API, the editor's Run
dialog, `run_workflow`), naming each field that is wrong.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema

from workflows.engine import limits
from workflows.engine.errors import GraphIssue

FIELD_TYPES = ("string", "number", "integer", "boolean", "array", "object")

# The keywords a field may use. Regular expressions (`pattern`) and references are left out on
# purpose: a hostile pattern could make every start of the workflow slow.
_FIELD: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "type": {"enum": list(FIELD_TYPES)},
        "title": {"type": "string", "maxLength": 200},
        "description": {"type": "string", "maxLength": 2000},
        "default": {},
        "examples": {"type": "array", "maxItems": 20},
        "enum": {"type": "array", "minItems": 1, "maxItems": 200},
        "format": {"type": "string", "maxLength": 50},
        "minimum": {"type": "number"},
        "maximum": {"type": "number"},
        "exclusiveMinimum": {"type": "number"},
        "exclusiveMaximum": {"type": "number"},
        "minLength": {"type": "integer", "minimum": 0},
        "maxLength": {"type": "integer", "minimum": 0},
        "minItems": {"type": "integer", "minimum": 0},
        "maxItems": {"type": "integer", "minimum": 0},
        "items": {"$ref": "#/$defs/field"},
        "properties": {"type": "object", "additionalProperties": {"$ref": "#/$defs/field"}},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "additionalProperties": {"type": "boolean"},
    },
}
INPUT_SHAPE: dict[str, Any] = {
    "$defs": {"field": _FIELD},
    "type": "object",
    "required": ["type"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "object"},
        "title": {"type": "string", "maxLength": 200},
        "description": {"type": "string", "maxLength": 2000},
        "properties": {"type": "object", "maxProperties": limits.MAX_INPUT_FIELDS,
                       "additionalProperties": {"$ref": "#/$defs/field"}},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "additionalProperties": {"type": "boolean"},
    },
}
_SHAPE_VALIDATOR = jsonschema.Draft202012Validator(INPUT_SHAPE)

TYPE_WORDS = {"string": "a string", "number": "a number", "integer": "a whole number", "boolean": "true or false",
              "array": "a list", "object": "an object", "null": "null"}


def schema_issues(schema: Any) -> list[GraphIssue]:
    """What is wrong with a declared input schema (each issue's field starts with `input`)."""
    problem = _too_big(schema)
    if problem:
        return [GraphIssue(f"input: {problem}", field="input")]
    issues = []
    for error in sorted(_SHAPE_VALIDATOR.iter_errors(schema), key=lambda e: [str(p) for p in e.path]):
        location = ".".join(["input", *(str(p) for p in error.path)])
        message = error.message
        if error.validator == "additionalProperties" and error.validator_value is False:
            message = f"{message} (a field may use: {', '.join(sorted(_FIELD['properties']))})"
        issues.append(GraphIssue(f"{location}: {message}", field=location))
    if issues:
        return issues
    issues += root_required_issues(schema)
    for path, field in _fields(schema, "input"):
        issues += _field_issues(path, field)
    return issues


def _too_big(schema: Any) -> str | None:
    size = len(json.dumps(schema))
    if size > limits.MAX_INPUT_SCHEMA_BYTES:
        return f"the schema is too large ({size} bytes of JSON, {limits.MAX_INPUT_SCHEMA_BYTES} at most)"
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict) and isinstance(value.get("properties"), dict):
            if depth > limits.MAX_INPUT_DEPTH:
                return f"fields are nested too deeply ({limits.MAX_INPUT_DEPTH} levels at most)"
            stack.extend((child, depth + 1) for child in value["properties"].values())
            if isinstance(value.get("items"), dict):
                stack.append((value["items"], depth + 1))
        elif isinstance(value, dict) and isinstance(value.get("items"), dict):
            stack.append((value["items"], depth + 1))
    return None


def _fields(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every declared field under `schema`, depth first, with its dotted path."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, field in (schema.get("properties") or {}).items():
        out.append((f"{path}.{name}", field))
        out += _fields(field, f"{path}.{name}")
    return out


def _field_issues(path: str, field: dict[str, Any]) -> list[GraphIssue]:
    issues = []
    for name in field.get("required") or []:
        if name not in (field.get("properties") or {}):
            issues.append(GraphIssue(f"{path}: required field '{name}' is not declared", field=path))
    checker = jsonschema.Draft202012Validator({k: v for k, v in field.items() if k not in ("default", "examples")})
    if "default" in field:
        for error in checker.iter_errors(field["default"]):
            issues.append(GraphIssue(f"{path}.default: {_readable(error)}", field=f"{path}.default"))
    for i, example in enumerate(field.get("examples") or []):
        for error in checker.iter_errors(example):
            issues.append(GraphIssue(f"{path}.examples.{i}: {_readable(error)}", field=f"{path}.examples.{i}"))
    return issues


def root_required_issues(schema: dict[str, Any]) -> list[GraphIssue]:
    return [GraphIssue(f"input: required field '{name}' is not declared", field="input.required")
            for name in schema.get("required") or [] if name not in (schema.get("properties") or {})]


def with_defaults(schema: dict[str, Any] | None, data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every absent field that declares a `default` filled in (nested objects too)."""
    if not schema:
        return dict(data)
    out = dict(data)
    for name, field in (schema.get("properties") or {}).items():
        if name not in out and "default" in field:
            out[name] = copy.deepcopy(field["default"])
        if isinstance(out.get(name), dict) and field.get("properties"):
            out[name] = with_defaults(field, out[name])
    return out


def input_errors(schema: dict[str, Any] | None, data: dict[str, Any]) -> dict[str, str]:
    """Each wrong field of a start input by its dotted name (`amount`, `address.city`): what is wrong."""
    if not schema:
        return {}
    errors: dict[str, str] = {}
    for error in jsonschema.Draft202012Validator(schema).iter_errors(data):
        path = [str(p) for p in error.path]
        if error.validator == "required":
            present = error.instance if isinstance(error.instance, dict) else {}
            for name in error.validator_value:
                if name not in present:
                    errors.setdefault(".".join([*path, str(name)]), "is required")
        elif error.validator == "additionalProperties":
            declared = (error.schema.get("properties") or {}) if isinstance(error.schema, dict) else {}
            for name in error.instance if isinstance(error.instance, dict) else []:
                if name not in declared:
                    errors.setdefault(".".join([*path, str(name)]), "is not a declared input")
        else:
            errors.setdefault(".".join(path), _readable(error))
    return dict(sorted(errors.items()))


def describe_errors(errors: dict[str, str], prefix: str = "input") -> str:
    return "; ".join(f"{prefix}.{name}: {message}" if name else f"{prefix}: {message}"
                     for name, message in errors.items())


def _readable(error: jsonschema.ValidationError) -> str:
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return "must be " + " or ".join(TYPE_WORDS.get(str(k), str(k)) for k in kinds)
    if error.validator == "enum":
        return "must be one of: " + ", ".join(json.dumps(v) for v in error.validator_value)
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than",
                "exclusiveMaximum": "less than"}[str(error.validator)]
        return f"must be {word} {error.validator_value}"
    return str(error.message)


class InputInvalid(Exception):
    """A start input that does not match the workflow's declared input (`fields`: name -> problem)."""

    def __init__(self, fields: dict[str, str], prefix: str = "input", index: int | None = None) -> None:
        super().__init__(describe_errors(fields, prefix))
        self.fields = fields
        self.prefix = prefix
        self.index = index  # which input of a bulk start

    @property
    def message(self) -> str:
        return str(self)


def prepare_input(schema: dict[str, Any] | None, data: dict[str, Any], prefix: str = "input",
                  index: int | None = None) -> dict[str, Any]:
    """The start input with its defaults filled in; raises InputInvalid naming every wrong field."""
    filled = with_defaults(schema, data)
    errors = input_errors(schema, filled)
    if errors:
        raise InputInvalid(errors, prefix, index)
    return filled
