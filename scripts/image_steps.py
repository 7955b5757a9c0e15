"""Run docker/Dockerfile's build steps without a Docker engine: its RUN commands, unchanged, in a fresh venv.

    python scripts/image_steps.py [--dry-run] [--keep]

The Dockerfile is read, not restated: ENV, WORKDIR, COPY and RUN are carried out in order inside a
temporary directory that stands in for the image's root (`/app` becomes `<tmp>/root/app`, an ENV value
that is an absolute path is moved under it too), with a fresh venv's `python` and `pip` first on PATH
(standing in for the base image's Python). Each RUN line runs with `sh -e -c`, as Docker runs it. What
this does not check: the base image itself (python:3.11-slim, Debian's Python here), the layer cache,
and anything that needs the engine (the image's size, its user, the running containers).

`--dry-run` prints the plan (one JSON object per instruction) without running it; the test
tests/scripts/test_image_steps.py compares that plan with the Dockerfile's RUN lines so the two
cannot drift, and runs the whole thing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
# Instructions that do not change what the build steps do (metadata, the run-time command).
IGNORED = {"FROM", "EXPOSE", "CMD", "ENTRYPOINT", "LABEL", "ARG", "USER", "HEALTHCHECK", "VOLUME", "STOPSIGNAL"}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    argument: str


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    result: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, argument = full.partition(" ")
        result.append(Instruction(keyword.upper(), argument.strip()))
    if pending:
        raise ValueError("the Dockerfile ends inside a continued instruction")
    return result


def run_commands(text: str) -> list[str]:
    """The shell commands of the RUN instructions, in order."""
    return [i.argument for i in instructions(text) if i.keyword == "RUN"]


def env_pairs(argument: str) -> list[tuple[str, str]]:
    """`ENV A=1 B="two words"` (the legacy `ENV A 1` form too)."""
    words = shlex.split(argument)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [(k, v) for k, _, v in (w.partition("=") for w in words)]


class Build:
    """Carries out the instructions in a temporary root with a fresh venv."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root.parent / "venv"
        self.workdir = root
        self.env = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(root.parent / "home"),
                    "LANG": "C.UTF-8"}
        # The machine's pip configuration (mirrors, CA bundle) is kept, as a build host's would be.
        for name, value in os.environ.items():
            if name.startswith("PIP_") or name in ("PIP_CONFIG_FILE", "http_proxy", "https_proxy", "no_proxy"):
                self.env[name] = value

    def inside(self, path: str) -> Path:
        """An image path (absolute, or relative to WORKDIR) inside the temporary root."""
        return self.root / path.lstrip("/") if path.startswith("/") else self.workdir / path

    def apply(self, step: Instruction) -> None:
        if step.keyword in IGNORED:
            return
        if step.keyword == "ENV":
            for name, value in env_pairs(step.argument):
                self.env[name] = str(self.inside(value)) if value.startswith("/") else value
        elif step.keyword == "WORKDIR":
            self.workdir = self.inside(step.argument)
            self.workdir.mkdir(parents=True, exist_ok=True)
        elif step.keyword == "COPY":
            *sources, dest = shlex.split(step.argument)
            if any(s.startswith("--") for s in sources):
                raise ValueError(f"COPY flags are not supported here: {step.argument}")
            target = self.inside(dest)
            for source in sources:
                origin = ROOT / source
                if origin.is_dir():  # as Docker does: the directory's contents, not the directory
                    shutil.copytree(origin, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                elif dest.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, target / origin.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, target)
        elif step.keyword == "RUN":
            subprocess.run(["sh", "-e", "-c", step.argument], cwd=self.workdir, env=self.env, check=True)
        else:
            raise ValueError(f"{step.keyword} is not supported by scripts/image_steps.py: add it here")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    steps = instructions(DOCKERFILE.read_text())
    if args.dry_run:
        for step in steps:
            print(json.dumps({"instruction": step.keyword, "argument": step.argument,
                              "runs": step.keyword not in IGNORED}))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="sf-image-steps-"))
    started = time.monotonic()
    try:
        (tmp / "root").mkdir()
        (tmp / "home").mkdir()
        venv.EnvBuilder(with_pip=True).create(tmp / "venv")
        build = Build(tmp / "root")
        for step in steps:
            if step.keyword not in IGNORED:
                print(f"--- {step.keyword} {step.argument}", flush=True)
            build.apply(step)
        print(f"image steps OK in {time.monotonic() - started:.0f} s ({tmp})", flush=True)
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"image steps FAILED: exit {exc.returncode} from: {exc.cmd[-1]}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
