"""scripts/image_steps.py runs docker/Dockerfile's build steps without a Docker engine.

The drift test reads the Dockerfile's RUN lines here, independently of the script, and checks the
script's plan runs exactly those, with every COPY source present. The build test runs the script: a
fresh venv, `pip install .`, collectstatic and `check --deploy` with the production settings (about
1-2 minutes, most of it pip; marked `image`, deselect with `-m "not image"`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SCRIPT = ROOT / "scripts" / "image_steps.py"


def dockerfile_runs() -> list[str]:
    """RUN commands as Docker reads them: continuation lines joined (one space), comments skipped."""
    logical = re.sub(r"\\\n(\s*#[^\n]*\n)*\s*", " ", DOCKERFILE.read_text())
    return [words(m[1]) for m in re.finditer(r"^RUN\s+(.+)$", logical, flags=re.MULTILINE)]


def words(command: str) -> str:
    """Runs of blanks as one space (what a line continuation leaves differs, the shell's words do not)."""
    return " ".join(command.split())


def plan() -> list[dict[str, object]]:
    result = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True,
                            timeout=60, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_script_runs_exactly_the_dockerfiles_run_lines() -> None:
    steps = plan()
    runs = [words(str(s["argument"])) for s in steps if s["instruction"] == "RUN"]
    assert runs == dockerfile_runs()
    assert len(runs) >= 2 and runs[0] == "pip install ."
    assert "collectstatic" in runs[-1] and "check --deploy" in runs[-1]
    assert all(s["runs"] for s in steps if s["instruction"] in ("RUN", "COPY", "ENV", "WORKDIR"))
    # Everything the image copies exists, and nothing absolute is written outside the ENV variables.
    for step in steps:
        if step["instruction"] == "COPY":
            *sources, _dest = str(step["argument"]).split()
            for source in sources:
                assert (ROOT / source).exists(), source
    for run in runs:
        assert not re.search(r"(?<![\w$\"{])/(data|app|usr|etc|tmp)\b", run), f"absolute path in RUN: {run}"


def test_the_dockerfile_copies_what_the_processes_import() -> None:
    copied = {str(s["argument"]).split()[0] for s in plan() if s["instruction"] == "COPY"}
    assert {"workflows", "dashboard", "manage.py", "static", "templates", "pyproject.toml"} <= copied


@pytest.mark.image
def test_the_image_build_steps_pass_in_a_fresh_venv() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "image steps OK" in result.stdout
    # Each RUN line was run, in order.
    ran = [words(line.removeprefix("--- RUN ")) for line in result.stdout.splitlines() if line.startswith("--- RUN ")]
    assert ran == dockerfile_runs()
