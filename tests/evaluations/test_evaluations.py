"""Evaluations (workflows/evaluations/): datasets as JSONL, every kind of expectation, runs on the real job
path (RQ on the real Redis, claims and commits on the real database) with the `--burst` command, versions
compared row by row, and production's figures untouched."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from workflows.authoring.definitions import save_version
from workflows.engine.functions import FunctionCall, register_function
from workflows.evaluations import datasets, runner
from workflows.evaluations.models import Evaluation
from workflows.models import ReviewItem, WorkflowDefinition, WorkflowInstance, WorkflowVersion

pytestmark = pytest.mark.django_db(transaction=True)


@register_function("tests.eval_polite")
def polite(call: FunctionCall) -> dict[str, Any]:
    return {"passed": str(call.args["value"]).startswith("Hello"), "detail": "not polite"}


def greeter(words: str) -> dict[str, Any]:
    return chain({"id": "greet", "type": "python", "config": {
        "function": "tests.echo", "args": {"set": {"answer": words + " {{ input.name }}",
                                                   "meta": {"name": "{{ input.name }}"}}}}})


ROWS = [
    {"label": "ada", "input": {"name": "Ada"}, "expect": [
        {"type": "equals", "path": "answer", "value": "Hello Ada"},
        {"type": "schema", "path": "meta", "schema": {"type": "object", "required": ["name"]}},
        {"type": "python", "path": "answer", "function": "tests.eval_polite"}]},
    {"label": "bob", "input": {"name": "Bob"}, "expect": [
        {"type": "contains", "path": "answer", "value": "Bob"},
        {"type": "llm_judge", "path": "answer", "rubric": "Is it a greeting?", "provider": "scripted",
         "script": [{"text": "FAIL (the judge's answer for row 1)"}, {"text": "PASS it greets"}]}]},
]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def evaluate(*args: str) -> tuple[dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("evaluate", *args, "--burst", stdout=out, stderr=err)
    except CommandError:
        return json.loads(out.getvalue()), err.getvalue() + "EXIT 1"
    return json.loads(out.getvalue()), err.getvalue()


def test_a_version_is_evaluated_and_a_regression_fails_the_command(redis_conn, tmp_path) -> None:
    v1 = save_version("greeter", greeter("Hello"))
    path = tmp_path / "rows.jsonl"
    path.write_text(jsonl(ROWS))
    out = io.StringIO()
    call_command("dataset", "import", "greeter", "smoke", str(path), stdout=out)
    assert "2 row(s)" in out.getvalue()

    first, log = evaluate("greeter", "--dataset", "smoke", "--version", "1")
    assert "EXIT 1" not in log, log
    assert (first["rows"], first["passed"], first["failed"], first["errors"]) == (2, 2, 0, 0)
    evaluation = Evaluation.objects.get(pk=first["evaluation"])
    results = list(evaluation.results.order_by("row__number"))
    assert [c["passed"] for c in results[0].checks] == [True, True, True]
    assert results[1].checks[1] == {"type": "llm_judge", "path": "answer", "passed": True, "detail": "PASS it greets"}
    assert all(r.latency_ms is not None for r in results)

    save_version("greeter", greeter("Bye"))
    second, log = evaluate("greeter", "--dataset", "smoke")
    assert log.endswith("EXIT 1")
    assert second["baseline_version"] == 1 and second["regressions"] == [1] and second["passed"] == 1
    assert "got Bye Ada, expected Hello Ada" in log and "not polite" in log
    comparison = runner.compare(evaluation, Evaluation.objects.get(pk=second["evaluation"]))
    assert comparison["changes"]["changed"] == ["greet"]
    assert [(r["row"], r["base"], r["other"]) for r in comparison["rows"]] == [(1, "passed", "failed"),
                                                                              (2, "passed", "passed")]

    # Production's history and figures never see an evaluation's runs.
    assert not WorkflowInstance.objects.filter(version=v1).exists()
    assert WorkflowInstance.objects.filter(version__definition__slug="greeter--eval").count() == 4
    assert not WorkflowDefinition.objects.exclude(slug__contains="--").filter(slug="greeter--eval").exists()
    assert WorkflowVersion.objects.filter(definition__slug="greeter--eval").count() == 2


def test_a_halting_row_is_an_error_and_leaves_nothing_in_the_inbox(redis_conn) -> None:
    halting = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                    settings={"budget_usd": 0.0001, "ttl_s": 0.001})
    version = save_version("sleeper", halting)
    dataset = datasets.save(version.definition, "one", jsonl([{"input": {}, "expect": []}]))
    evaluation = runner.start(dataset, version, concurrency=1)
    from workflows.scheduler import inprocess, reconciler

    for _ in range(20):
        inprocess.drain()
        reconciler.tick()
        if runner.advance(evaluation.pk):
            break
    evaluation.refresh_from_db()
    (result,) = evaluation.results.all()
    assert result.status == "error" and "the run ended" in result.checks[0]["detail"]
    assert not ReviewItem.objects.filter(status="open").exists()


@pytest.mark.parametrize(("text", "message"), [
    ('{"input": {}}\n{"input": {}, "expect": [{"type": "equals"}]}\n', "line 2, expectation 1: equals needs a 'value'"),
    ('{"input": {}}\nnot json\n', "line 2: not valid JSON"),
    ('{"input": [1]}\n', "line 1: a row is an object with an 'input' object"),
    ('{"input": {}, "expect": [{"type": "schema", "schema": {"type": 5}}]}\n', "schema is not a valid JSON Schema"),
    ('{"input": {}, "expect": [{"type": "python", "function": "nope"}]}\n', "function 'nope' is not registered"),
    ('{"input": {}, "extra": 1}\n', "unknown key(s) extra"),
    ("\n", "the file has no rows"),
])
def test_a_malformed_dataset_is_refused_naming_its_line(text: str, message: str) -> None:
    version = save_version("refused", greeter("Hi"))
    with pytest.raises(datasets.DatasetInvalid, match=message.replace("(", r"\(").replace(")", r"\)")):
        datasets.save(version.definition, "bad", text)
    assert not version.definition.datasets.exists()


def test_export_round_trips(tmp_path) -> None:
    version = save_version("round", greeter("Hi"))
    datasets.save(version.definition, "rt", jsonl(ROWS))
    out = io.StringIO()
    call_command("dataset", "export", "round", "rt", stdout=out)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {"input": r["input"], "expect": r["expect"], "label": r["label"]} for r in ROWS]


def test_the_api_and_pages(redis_conn, client, user_in, roles) -> None:
    save_version("paged", greeter("Hello"))
    client.force_login(user_in("viewers", "vera"))
    refused = client.post("/api/workflows/paged/datasets", {"name": "x", "jsonl": "{}"},
                          content_type="application/json")
    assert refused.status_code == 403
    client.force_login(user_in("designers", "dina"))
    bad = client.post("/api/workflows/paged/datasets", {"name": "smoke", "jsonl": '{"input": {}}\n{oops\n'},
                      content_type="application/json")
    assert bad.status_code == 400 and bad.json()["message"].startswith("line 2: not valid JSON")
    made = client.post("/api/workflows/paged/datasets", {"name": "smoke", "jsonl": jsonl(ROWS)},
                       content_type="application/json")
    assert made.status_code == 201 and made.json() == {"name": "smoke", "rows": 2}
    exported = client.get("/api/workflows/paged/datasets/smoke")
    assert exported["Content-Type"] == "application/x-ndjson"
    assert [json.loads(line) for line in exported.content.decode().splitlines()] == ROWS
    started = client.post("/api/workflows/paged/evaluations", {"dataset": "smoke", "version": 1, "concurrency": 1},
                          content_type="application/json")
    assert started.status_code == 201, started.content
    evaluation_id = started.json()["id"]
    from workflows.scheduler import inprocess

    for _ in range(20):
        inprocess.drain()
        if runner.advance(evaluation_id):
            break
    detail = client.get(f"/api/evaluations/{evaluation_id}").json()
    assert detail["status"] == "finished" and [r["status"] for r in detail["results"]] == ["passed", "passed"]
    assert client.post("/api/workflows/paged/evaluations", {"dataset": "nope"},
                       content_type="application/json").status_code == 400

    page = client.get("/workflows/paged/evaluations/")
    assert page.status_code == 200 and b"smoke" in page.content and b'id="ev-run-form"' in page.content
    one = client.get(f"/evaluations/{evaluation_id}/").content.decode()
    assert "2 of 2 passed" in one and "Hello Ada" in one
    again = client.post("/workflows/paged/evaluations/", {"form": "evaluate", "dataset": "smoke", "version": "1"})
    assert again.status_code == 302
    second = Evaluation.objects.exclude(pk=evaluation_id).get()
    for _ in range(20):
        inprocess.drain()
        if runner.advance(second.pk):
            break
    compared = client.get(f"/evaluations/{second.pk}/?compare={evaluation_id}").content.decode()
    assert "0 regressed, 0 fixed" in compared
    assert client.get(f"/api/evaluations/{second.pk}/compare/{evaluation_id}").json()["regressions"] == []
