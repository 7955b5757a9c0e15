"""The management commands a person types: load_examples, run_workflow, validate_workflow, run_worker and
run_scheduler. Every error message they can show is checked here; a few runs go through the real
`manage.py` process to check exit codes and that stdout holds exactly one JSON object."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import ROOT, wait_for
from tests.support.forkserver import python_run
from workflows.models import WorkflowDefinition, WorkflowInstance

GRAPHS = Path(__file__).parent / "graphs"
GREETING = GRAPHS / "greeting.json"
EXAMPLE_SLUGS = {"order-desk", "react-agent", "refund-saga", "industry-report", "hallucination-loop", "support-desk",
                 "research-agent", "planner-demo"}
SUMMARY_KEYS = {"instance", "workflow", "version", "status", "reason", "error", "steps", "loop_count", "tokens",
                "cost_usd", "trace_id", "priority", "context"}


def run(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def run_json(*args: str) -> dict[str, Any]:
    """run_workflow prints one JSON object on one line, nothing else."""
    out = run(*args)
    lines = out.splitlines()
    assert len(lines) == 1, out
    summary = json.loads(lines[0])
    assert set(summary) == SUMMARY_KEYS
    return summary


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return python_run([sys.executable, "manage.py", *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=120)


def command_error(*args: str) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    return str(caught.value)


# --- load_examples ----------------------------------------------------------------------------------

@pytest.mark.django_db
def test_load_examples_prints_every_slug_and_skips_unchanged_graphs():
    first = run("load_examples").splitlines()
    assert {line.split()[0] for line in first} == EXAMPLE_SLUGS
    assert all(line.split()[1] == "v1" for line in first)
    again = run("load_examples").splitlines()
    assert {line.split()[0] for line in again} == EXAMPLE_SLUGS
    assert all(line.endswith("v1 (unchanged)") for line in again)
    assert WorkflowDefinition.objects.count() == len(EXAMPLE_SLUGS)
    assert all(d.versions.count() == 1 for d in WorkflowDefinition.objects.all())


# --- run_workflow -----------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_run_workflow_slug_waits_for_real_workers_and_prints_one_json_object(processes, redis_conn):
    run("load_examples")
    processes.all_workers()
    summary = run_json("run_workflow", "react-agent", "--input", '{"question": "where is order 42?"}',
                       "--wait", "60")
    assert summary["status"] == "completed"
    assert summary["reason"] is None and summary["error"] is None
    assert summary["workflow"] == "react-agent" and summary["version"] == 1
    assert summary["steps"] == 8
    assert summary["context"]["reply"] == "Your order ships tomorrow."
    instance = WorkflowInstance.objects.get(pk=summary["instance"])
    assert instance.status == "completed" and instance.trace_id == summary["trace_id"]


@pytest.mark.django_db(transaction=True)
def test_run_workflow_file_saves_a_version_when_changed_and_burst_runs_it_in_process(redis_conn, tmp_path):
    first = run_json("run_workflow", str(GREETING), "--input", '{"name": "Ada"}', "--burst")
    assert first["workflow"] == "fixture-greeting" and first["version"] == 1
    assert first["status"] == "completed"
    assert first["context"] == {"name": "Ada", "greeting": "Hello there!"}
    assert first["steps"] == 4

    # The same graph again: the latest version is reused, not saved once more.
    second = run_json("run_workflow", str(GREETING), "--burst")
    assert second["version"] == 1 and second["status"] == "completed"
    changed = json.loads(GREETING.read_text())
    changed["settings"]["ttl_s"] = 900
    copy = tmp_path / "greeting.json"
    copy.write_text(json.dumps(changed))
    third = run_json("run_workflow", str(copy), "--burst")
    assert third["version"] == 2 and third["status"] == "completed"
    definition = WorkflowDefinition.objects.get(slug="fixture-greeting")
    assert definition.name == "Greeting (test fixture)"
    assert [v.message for v in definition.versions.order_by("number")] == ["run_workflow greeting.json"] * 2
    # The steps ran through the real job path: claimed from a queue by this process's burst worker.
    instance = WorkflowInstance.objects.get(pk=first["instance"])
    assert all(s.worker for s in instance.steps.exclude(node_type__in=("start", "end")))


@pytest.mark.django_db(transaction=True)
def test_run_workflow_cli_prints_only_json_on_stdout(worker_env, redis_conn):
    result = manage("run_workflow", str(GREETING), "--input", '{"name": "Bo"}', "--burst", env=worker_env)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    summary = json.loads(line)
    assert summary["status"] == "completed" and summary["context"]["greeting"] == "Hello there!"


@pytest.mark.django_db
def test_run_workflow_without_wait_prints_the_instance_as_it_is():
    run("load_examples")
    summary = run_json("run_workflow", "react-agent", "--input", '{"question": "hi"}')
    assert summary["status"] == "running"
    assert summary["steps"] == 2  # start, and the first step queued
    # --wait that runs out prints the unsettled state rather than failing.
    summary = run_json("run_workflow", "react-agent", "--wait", "0.2")
    assert summary["status"] == "running"


@pytest.mark.django_db
def test_run_workflow_idempotency_key_returns_the_same_instance():
    run("load_examples")
    first = run_json("run_workflow", "react-agent", "--idempotency-key", "cli-1")
    again = run_json("run_workflow", "react-agent", "--idempotency-key", "cli-1")
    assert first["instance"] == again["instance"]
    assert WorkflowInstance.objects.count() == 1


@pytest.mark.django_db
def test_run_workflow_inputs_file_starts_one_instance_per_line_in_one_go(tmp_path):
    run("load_examples")
    lines = tmp_path / "inputs.jsonl"
    lines.write_text('{"question": "a"}\n\n{"question": "b"}\n')
    out = run("run_workflow", "react-agent", "--inputs", str(lines)).splitlines()
    summaries = [json.loads(line) for line in out]
    assert [s["status"] for s in summaries] == ["running", "running"]
    assert len({s["instance"] for s in summaries}) == 2
    assert sorted(i.input["question"] for i in WorkflowInstance.objects.all()) == ["a", "b"]
    lines.write_text('{"question": "a"}\n[1]\n')
    assert command_error("run_workflow", "react-agent", "--inputs", str(lines)) == \
        f"{lines} line 2 must be a JSON object"
    lines.write_text("\n")
    assert command_error("run_workflow", "react-agent", "--inputs", str(lines)) == f"{lines} holds no start input"
    assert WorkflowInstance.objects.count() == 2


@pytest.mark.django_db
def test_run_workflow_input_errors(tmp_path):
    run("load_examples")
    assert command_error("run_workflow", "react-agent", "--input", "{nope") == \
        "--input is not valid JSON: Expecting property name enclosed in double quotes"
    assert command_error("run_workflow", "react-agent", "--input", "[1, 2]") == "--input must be a JSON object"
    assert command_error("run_workflow", "react-agent", "--input", '"text"') == "--input must be a JSON object"
    # Checked against the workflow's declared input, each wrong field named.
    assert command_error("run_workflow", "react-agent", "--input", '{"question": 5}') == \
        "input.question: must be a string"
    lines = tmp_path / "inputs.jsonl"
    lines.write_text('{"amount": 1}\n{"amount": "x"}\n')
    assert command_error("run_workflow", "refund-saga", "--inputs", str(lines)) == \
        "inputs[1].amount: must be a number"
    assert WorkflowInstance.objects.count() == 0


@pytest.mark.django_db
def test_run_workflow_applies_the_declared_defaults():
    run("load_examples")
    summary = run_json("run_workflow", "refund-saga", "--input", '{"amount": 40}')
    instance = WorkflowInstance.objects.get(pk=summary["instance"])
    assert instance.input["amount"] == 40 and instance.input["request_id"] == "R-1001"
    assert instance.input["ledger_base"].endswith("/demo/ledger")


@pytest.mark.django_db
def test_run_workflow_payload_too_large(settings):
    run("load_examples")
    settings.STEADYFLOW = {**settings.STEADYFLOW, "MAX_PAYLOAD_BYTES": 2048}
    message = command_error("run_workflow", "react-agent", "--input", json.dumps({"blob": "x" * 4000}))
    assert message.startswith("start input is 40")
    assert "over the limit of 2048 bytes (STEADYFLOW_MAX_PAYLOAD_BYTES)" in message


@pytest.mark.django_db
def test_run_workflow_unknown_slug_names_the_known_ones():
    assert command_error("run_workflow", "ghost") == \
        "no workflow 'ghost' (known: none); run load_examples or pass a file"
    run("load_examples")
    message = command_error("run_workflow", "ghost")
    assert message.startswith("no workflow 'ghost' (known: ")
    assert all(slug in message for slug in EXAMPLE_SLUGS)
    WorkflowDefinition.objects.create(slug="empty", name="empty")
    assert command_error("run_workflow", "empty") == "workflow 'empty' has no saved version"


@pytest.mark.django_db
def test_run_workflow_file_errors(tmp_path):
    missing = tmp_path / "missing.json"
    assert command_error("run_workflow", str(missing)) == f"cannot read {missing}: No such file or directory"
    assert command_error("run_workflow", str(tmp_path) + os.sep) == f"cannot read {tmp_path}{os.sep}: Is a directory"

    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [\n  {"id": "a"}\n  {"id": "b"}\n]}')
    assert command_error("run_workflow", str(bad)) == \
        f"{bad} is not valid JSON: Expecting ',' delimiter at line 3"

    message = command_error("run_workflow", str(GRAPHS / "broken.json"))
    lines = message.splitlines()
    assert lines[:3] == [
        "invalid graph:",
        "  node 'fetch': config: 'url' is a required property",
        "  edge 3 (calc -> ghost): target 'ghost' is not a node",
    ]
    # In the same pass (no longer hidden until the config is fixed): the node's own check.
    assert len(lines) == 4 and lines[3].startswith("  node 'calc': function 'nowhere.missing' is not registered")
    assert command_error("run_workflow", str(GRAPHS / "cycle.json")).splitlines() == [
        "invalid graph:",
        "  unconditional cycle ping -> pong -> ping: every cycle must pass through a conditional edge or a "
        "router node",
    ]
    assert command_error("run_workflow", str(GRAPHS / "no_slug.json")) == \
        "invalid graph:\n  the graph file has no 'slug': name the definition to save it under"
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    assert command_error("run_workflow", str(not_object)) == \
        "invalid graph:\n  the graph must be a JSON object with 'nodes' and 'edges'"
    assert WorkflowDefinition.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_run_workflow_cli_error_exit_code(worker_env):
    result = manage("run_workflow", "ghost", env=worker_env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "CommandError: no workflow 'ghost' (known: none)" in result.stderr


# --- validate_workflow ------------------------------------------------------------------------------

def test_validate_workflow_valid_file_exits_0():
    for graph in (GREETING, GRAPHS / "no_slug.json"):
        result = manage("validate_workflow", str(graph))
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"{graph}: valid\n"


def test_validate_workflow_invalid_file_exits_1_listing_every_error():
    result = manage("validate_workflow", str(GRAPHS / "broken.json"))
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[:2] == [
        "error: node 'fetch': config: 'url' is a required property",
        "error: edge 3 (calc -> ghost): target 'ghost' is not a node",
    ]
    assert lines[2].startswith("error: node 'calc': function 'nowhere.missing' is not registered")
    assert lines[3:] == [f"CommandError: {GRAPHS / 'broken.json'}: 3 error(s)"]


def test_validate_workflow_error_messages(tmp_path):
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"cycle\.json: 1 error\(s\)$"):
        call_command("validate_workflow", str(GRAPHS / "cycle.json"), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().startswith("error: unconditional cycle ping -> pong -> ping")

    missing = tmp_path / "nope.json"
    assert command_error("validate_workflow", str(missing)) == f"cannot read {missing}: No such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [}')
    assert command_error("validate_workflow", str(bad)) == \
        f"{bad} is not valid JSON: Expecting value at line 1 column 12"

    listed = tmp_path / "list.json"
    listed.write_text("[]")
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 error"):
        call_command("validate_workflow", str(listed), stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == "error: the graph must be a JSON object with 'nodes' and 'edges'\n"

    unregistered = tmp_path / "fn.json"
    unregistered.write_text(json.dumps({
        "nodes": [{"id": "start", "type": "start"},
                  {"id": "calc", "type": "python", "config": {"function": "nowhere.missing"}},
                  {"id": "end", "type": "end"}],
        "edges": [{"source": "start", "target": "calc"}, {"source": "calc", "target": "end"}]}))
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("validate_workflow", str(unregistered), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().startswith("error: node 'calc': function 'nowhere.missing' is not registered (known: ")


# --- run_worker and run_scheduler -------------------------------------------------------------------

def test_run_worker_errors():
    assert command_error("run_worker", "ai", "io") == "the ai queue runs in its own consumer: start it separately"
    message = command_error("run_worker", "fast")
    assert "argument queues: invalid choice: 'fast'" in message
    assert "choose from" in message and "'ai'" in message


@pytest.mark.parametrize("command", [["run_worker", "default", "--burst"], ["run_scheduler", "--once"],
                                     ["health", "--role", "worker"]])
def test_processes_refuse_to_start_on_the_engines_own_check_errors(command):
    """run_worker, run_scheduler and health run only the checks tagged ENGINE (workflows/checks.py), not
    Django's whole registry (which loads every URL and API schema): a bad engine setting still stops them."""
    result = manage(*command, env={**os.environ, "STEADYFLOW_LLM_BASE_URL": "ftp://llm.example"})
    assert result.returncode == 1
    assert "steadyflow.E001" in result.stderr and "must be an http(s) URL" in result.stderr


def test_processes_do_not_run_djangos_url_checks():
    from workflows.checks import ENGINE, PROCESS_CHECKS
    from workflows.management.commands import health, run_scheduler, run_worker

    assert PROCESS_CHECKS == [ENGINE]
    for module in (run_worker, run_scheduler, health):
        assert module.Command.requires_system_checks == PROCESS_CHECKS


@pytest.mark.django_db(transaction=True)
def test_run_scheduler_once_runs_one_tick_and_exits(worker_env, redis_conn):
    from workflows.authoring.definitions import save_version
    from workflows.runtime import start_instance

    graph = {"nodes": [{"id": "start", "type": "start"},
                       {"id": "work", "type": "python", "config": {"function": "noop"}},
                       {"id": "end", "type": "end"}],
             "edges": [{"source": "start", "target": "work"}, {"source": "work", "target": "end"}],
             "settings": {"ttl_s": 0.2}}
    instance = start_instance(save_version("short-lived", graph), {})
    wait_for(lambda: WorkflowInstance.objects.filter(pk=instance.pk, deadline__lt=_now()).exists(),
             message="the deadline to pass")
    result = manage("run_scheduler", "--once", env={**worker_env, "STEADYFLOW_TTL_ACTION": "fail"})
    assert result.returncode == 0, result.stderr
    instance.refresh_from_db()
    assert instance.status == "failed" and instance.halt_reason == "ttl_expired"
    assert "expired=1" in result.stderr


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()
