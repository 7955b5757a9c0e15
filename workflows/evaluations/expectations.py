"""What a dataset row expects of a run, and whether the run met it.

A row's `expect` is a list; each expectation reads a value at `path` (dotted, into the run's final
context; none: the whole context) and checks it one way:

    {"type": "equals",   "path": "route", "value": "refund"}
    {"type": "contains", "path": "answer", "value": "DHL"}          # substring, list item or dict key
    {"type": "schema",   "path": "ticket", "schema": {...}}        # JSON Schema
    {"type": "python",   "path": "answer", "function": "checks.polite"}  # a registered function
    {"type": "llm_judge", "path": "answer", "rubric": "Is it polite and correct?",
     "provider": "scripted", "script": [{"text": "PASS"}]}         # or the deployment's provider

A python check gets `args = {"value", "input", "context"}` and returns a bool, or
{"passed": bool, "detail": str}. The judge answers PASS or FAIL first, then its reason. Nothing here
raises on a run's data: a check that cannot apply fails with a detail saying why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema

from workflows.engine import outbound, providers
from workflows.engine.errors import StepError
from workflows.engine.functions import FunctionCall, get_function

TYPES = ("equals", "contains", "schema", "python", "llm_judge")
MISSING = object()
JUDGE_SYSTEM = ("You grade a workflow's output against a rubric. Answer PASS or FAIL as the first word, "
                "then one sentence saying why.")
JUDGE_TIMEOUT_S = 60.0


def problems(expectation: Any) -> list[str]:
    """Why an expectation cannot be used (empty when it can); checked when a dataset is imported."""
    if not isinstance(expectation, Mapping):
        return ["an expectation must be an object"]
    kind = expectation.get("type")
    if kind not in TYPES:
        return [f"type must be one of {', '.join(TYPES)}"]
    found = []
    if "path" in expectation and not isinstance(expectation["path"], str):
        found.append("path must be a dotted string")
    if kind in ("equals", "contains") and "value" not in expectation:
        found.append(f"{kind} needs a 'value'")
    if kind == "schema":
        try:
            jsonschema.validators.validator_for(expectation.get("schema")).check_schema(expectation.get("schema"))
        except (jsonschema.SchemaError, TypeError, AttributeError) as exc:
            found.append(f"schema is not a valid JSON Schema: {getattr(exc, 'message', exc)}")
    if kind == "python" and get_function(str(expectation.get("function"))) is None:
        found.append(f"function {expectation.get('function')!r} is not registered")
    if kind == "llm_judge":
        if not isinstance(expectation.get("rubric"), str) or not expectation["rubric"].strip():
            found.append("llm_judge needs a 'rubric'")
        if expectation.get("provider", "openai") not in ("openai", "scripted"):
            found.append("llm_judge's provider is openai (the deployment's) or scripted")
        if expectation.get("provider") == "scripted" and not expectation.get("script"):
            found.append("a scripted judge needs a 'script'")
    return found


def value_at(context: Any, path: str) -> Any:
    value = context
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def check(expectation: Mapping[str, Any], context: dict[str, Any], row_input: dict[str, Any], *,
          row_number: int, engine: Any) -> dict[str, Any]:
    """{"type", "path", "passed", "detail"} for one expectation against a run's final context."""
    path = str(expectation.get("path") or "")
    value = value_at(context, path)
    result = {"type": expectation.get("type"), "path": path}
    if value is MISSING:
        return {**result, "passed": False, "detail": f"the output has no {path!r}"}
    passed, detail = _checked(expectation, value, context, row_input, row_number, engine)
    return {**result, "passed": passed, "detail": detail}


def _checked(expectation: Mapping[str, Any], value: Any, context: dict[str, Any], row_input: dict[str, Any],
             row_number: int, engine: Any) -> tuple[bool, str]:
    kind = expectation.get("type")
    if kind == "equals":
        expected = expectation.get("value")
        return value == expected, "" if value == expected else f"got {_short(value)}, expected {_short(expected)}"
    if kind == "contains":
        needle = expectation.get("value")
        haystack = value if isinstance(value, list | dict) else str(value)
        found = needle in haystack if isinstance(haystack, list | dict) else str(needle) in haystack
        return found, "" if found else f"{_short(needle)} is not in {_short(value)}"
    if kind == "schema":
        error = next(iter(jsonschema.Draft202012Validator(expectation["schema"]).iter_errors(value)), None)
        return error is None, "" if error is None else f"schema: {error.message}"
    if kind == "python":
        return _python(str(expectation["function"]), value, context, row_input)
    return _judge(expectation, value, row_number, engine)


def _python(name: str, value: Any, context: dict[str, Any], row_input: dict[str, Any]) -> tuple[bool, str]:
    fn = get_function(name)
    if fn is None:
        return False, f"function {name!r} is not registered"
    try:
        answer = fn(FunctionCall(args={"value": value, "input": row_input, "context": context}, context=context,
                                 steps={}, start_input=row_input, idempotency_key="", instance_id=0,
                                 node_id="evaluation", visit=1, attempt=1))
    except Exception as exc:  # noqa: BLE001 - a check that raises is a failed check, with its reason
        return False, f"{name} raised {type(exc).__name__}: {str(exc)[:200]}"
    if isinstance(answer, Mapping):
        return bool(answer.get("passed")), str(answer.get("detail") or "")
    return bool(answer), "" if answer else f"{name} said no"


def _judge(expectation: Mapping[str, Any], value: Any, row_number: int, engine: Any) -> tuple[bool, str]:
    messages = [{"role": "system", "content": JUDGE_SYSTEM},
                {"role": "user", "content": f"Rubric: {expectation['rubric']}\n\nOutput:\n{_short(value, 4000)}"}]
    try:
        if expectation.get("provider") == "scripted":
            reply, _ = providers.scripted_reply(list(expectation["script"]), row_number - 1)
        else:
            reply = outbound.run_closing(providers.openai_chat(
                base_url=engine.llm_base_url, api_key=engine.llm_api_key,
                model=str(expectation.get("model") or "gpt-4o-mini"), messages=messages,
                timeout_s=JUDGE_TIMEOUT_S, limit=engine.llm_max_per_provider,
                policy=outbound.Policy(trusted=True)))
    except StepError as exc:
        return False, f"the judge could not answer: {exc.message[:200]}"
    text = (reply.text or "").strip()
    return text.upper().startswith("PASS"), text[:300]


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"
