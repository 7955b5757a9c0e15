"""Workflows in Git: export_workflows / import_workflows (workflows/authoring/gitsync.py), against the real database
and a real `git` repository in a temporary folder."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from workflows.authoring.definitions import save_document
from workflows.models import WorkflowDefinition, WorkflowVersion

pytestmark = pytest.mark.django_db

GREETING = json.loads((Path(__file__).parent / "graphs" / "greeting.json").read_text())


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def greeting(slug: str = "greet", **meta: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(GREETING)), "slug": slug, "name": "Greeting", "description": "says hi",
            **meta}


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=folder,
                          check=True, capture_output=True, text=True).stdout


def versions(slug: str) -> list[WorkflowVersion]:
    return list(WorkflowVersion.objects.filter(definition__slug=slug).order_by("number"))


def test_export_is_stable_pretty_and_skips_generated(tmp_path: Path) -> None:
    save_document(greeting())
    save_document(greeting("other", archived=True))
    WorkflowDefinition.objects.filter(slug="other").update(archived=True)
    WorkflowDefinition.objects.create(slug="greet--plan-x", name="generated")

    out, _ = run("export_workflows", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["greet.json", "other.json"]
    text = (tmp_path / "greet.json").read_text()
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert document["slug"] == "greet" and document["name"] == "Greeting" and "archived" not in document
    assert document["nodes"] == GREETING["nodes"] and document["edges"] == GREETING["edges"]
    assert json.loads((tmp_path / "other.json").read_text())["archived"] is True
    assert "greet: written" in out

    before = (tmp_path / "greet.json").stat().st_mtime_ns
    out, _ = run("export_workflows", str(tmp_path))
    assert "greet: unchanged" in out and "other: unchanged" in out
    assert (tmp_path / "greet.json").stat().st_mtime_ns == before


def test_import_is_idempotent_and_names_file_and_commit(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git(tmp_path, "init", "-q")
    (tmp_path / "greet.json").write_text(json.dumps(greeting(), indent=2))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "Add the greeting flow")
    commit = git(tmp_path, "rev-parse", "--short", "HEAD").strip()

    out, _ = run("import_workflows", str(tmp_path))
    assert "greet: created v1" in out
    [v1] = versions("greet")
    assert v1.message == f"Imported from greet.json, commit {commit}: Add the greeting flow"
    assert WorkflowDefinition.objects.get(slug="greet").description == "says hi"

    out, _ = run("import_workflows", str(tmp_path))
    assert "greet: unchanged" in out and len(versions("greet")) == 1

    changed = greeting(description="says hello")
    changed["nodes"][0]["label"] = "Start here"
    (tmp_path / "greet.json").write_text(json.dumps(changed))
    out, _ = run("import_workflows", str(tmp_path))
    assert "greet: created v2" in out
    assert versions("greet")[1].message.endswith("(with uncommitted changes)")
    assert WorkflowDefinition.objects.get(slug="greet").description == "says hello"

    # Metadata alone: updated in place, no new version.
    (tmp_path / "greet.json").write_text(json.dumps({**changed, "name": "Hello"}))
    out, _ = run("import_workflows", str(tmp_path))
    assert "greet: updated name" in out and len(versions("greet")) == 2
    assert WorkflowDefinition.objects.get(slug="greet").name == "Hello"


def test_round_trip_check_mode(tmp_path: Path) -> None:
    save_document(greeting())
    run("export_workflows", str(tmp_path))
    out, _ = run("import_workflows", "--check", str(tmp_path))
    assert "agree" in out
    run("export_workflows", "--check", str(tmp_path))

    document = json.loads((tmp_path / "greet.json").read_text())
    document["nodes"][0]["label"] = "edited"
    (tmp_path / "greet.json").write_text(json.dumps(document))
    save_document(greeting("only-in-db"))
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 difference"):
        call_command("import_workflows", "--check", str(tmp_path), stdout=io.StringIO(), stderr=err)
    assert "greet.json: 'nodes' differs" in err.getvalue()
    assert "only-in-db: in the database, no file only-in-db.json" in err.getvalue()
    assert len(versions("greet")) == 1  # --check writes nothing


def test_bad_files_are_named_and_the_rest_imports(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"nodes": [')
    bad_graph = greeting("bad")
    bad_graph["edges"].append({"source": "nowhere", "target": "nothing"})
    (tmp_path / "bad.json").write_text(json.dumps(bad_graph))
    (tmp_path / "renamed.json").write_text(json.dumps(greeting("other-name")))
    (tmp_path / "greet.json").write_text(json.dumps(greeting()))
    err = io.StringIO()
    with pytest.raises(CommandError, match="3 file"):
        call_command("import_workflows", str(tmp_path), stdout=io.StringIO(), stderr=err)
    text = err.getvalue()
    assert "broken.json: not valid JSON" in text and "line 1" in text
    assert "bad.json: the graph is not valid" in text and "nowhere" in text
    assert "renamed.json: its slug 'other-name' differs from the file's name" in text
    assert [v.number for v in versions("greet")] == [1]
    assert not WorkflowDefinition.objects.filter(slug__in=["bad", "other-name"]).exists()


def test_missing_folder_and_unknown_user(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such folder"):
        run("import_workflows", str(tmp_path / "nope"))
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        run("import_workflows", "--user", "ghost", str(tmp_path))
