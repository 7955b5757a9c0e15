"""The docs' pictures (docs/screenshots/) stay true and are written only on request: every image the README
and docs/*.md show is there, every file there is shown somewhere and taken by a browser test's `doc_shot`
(so `make screenshots` renews them all), and no test but tests/e2e/docshots.py writes there (a plain
`make test` must never rewrite a tracked file)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import docshots

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "docs" / "screenshots"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")
TESTS = Path(__file__).resolve().parent
# Failure pictures go to the test's tmp_path (tests/e2e/conftest.py's page fixtures); docshots.py is the one
# writer of docs/screenshots.
WRITERS_ALLOWED = {TESTS / "e2e" / "docshots.py", TESTS / "e2e" / "conftest.py"}


def shown() -> dict[Path, list[str]]:
    """Every image the README and docs/*.md show: its resolved file -> where it is shown."""
    out: dict[Path, list[str]] = {}
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for target in IMAGE.findall(line):
                if "://" in target:
                    continue
                out.setdefault((page.parent / target).resolve(), []).append(f"{page.relative_to(ROOT)}:{number}")
    return out


def test_every_image_the_docs_show_is_in_docs_screenshots() -> None:
    images = shown()
    assert images, "the README shows pictures: the pattern found none"
    outside = {str(p): where for p, where in images.items() if p.parent != SHOTS}
    missing = {str(p.relative_to(ROOT)): where for p, where in images.items() if p.parent == SHOTS and not p.is_file()}
    assert not outside, f"images outside docs/screenshots: {outside}"
    assert not missing, f"images shown but missing (run make screenshots): {missing}"


def test_every_picture_in_docs_screenshots_is_shown_and_taken_by_a_test() -> None:
    files = {p.resolve() for p in SHOTS.iterdir() if p.is_file()}
    orphans = sorted(p.name for p in files - set(shown()))
    assert not orphans, f"pictures no page shows (delete them or show them): {orphans}"
    taken = set()
    for source in (TESTS / "e2e").glob("test_*.py"):
        taken |= set(re.findall(r"doc_shot\([^\n]*?\"([\w.-]+\.png)\"", source.read_text()))
    untaken = sorted(p.name for p in files if p.name not in taken)
    assert not untaken, f"pictures no doc_shot(...) call takes (make screenshots could not renew them): {untaken}"


def strings_and_shots(source: Path) -> tuple[list[tuple[int, str]], list[int]]:
    """(line, text) of the string constants that are not docstrings, and the lines of .screenshot(path=...)."""
    tree = ast.parse(source.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    strings = [(node.lineno, node.value) for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    shots = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "screenshot"
             and (node.args or any(k.arg == "path" for k in node.keywords))]
    return strings, shots


def test_no_test_but_docshots_writes_into_docs_screenshots() -> None:
    offenders = []
    for source in sorted(TESTS.rglob("*.py")):
        if source in WRITERS_ALLOWED or source == Path(__file__).resolve() or "vendor" in source.parts:
            continue
        strings, shots = strings_and_shots(source)
        where = source.relative_to(ROOT)
        offenders += [f"{where}:{line} names the folder ({text!r})" for line, text in strings
                      if text == "screenshots" or "docs/screenshots" in text]
        offenders += [f"{where}:{line} writes a screenshot file (use doc_shot)" for line in shots]
    assert not offenders, "\n".join(offenders)


def test_the_check_finds_a_direct_writer(tmp_path: Path) -> None:
    """The scan above can fail: a test writing a picture itself is found."""
    bad = tmp_path / "test_bad.py"
    bad.write_text('"""Doc."""\nSHOT = ROOT / "docs" / "screenshots"\npage.screenshot(path=str(SHOT / "x.png"))\n')
    strings, shots = strings_and_shots(bad)
    assert (2, "screenshots") in strings and shots == [3]


class FakeTarget:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def screenshot(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        Path(kwargs["path"]).write_bytes(b"\x89PNG" + b"x" * 6000)


def test_doc_shot_takes_nothing_unless_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(docshots, "SHOTS", tmp_path)
    target = FakeTarget()
    monkeypatch.delenv(docshots.ASKED, raising=False)
    assert docshots.take(target, "editor.png") is None and target.calls == []
    monkeypatch.setenv(docshots.ASKED, "0")
    assert docshots.take(target, "editor.png") is None and target.calls == []
    monkeypatch.setenv(docshots.ASKED, "1")
    assert docshots.take(target, "editor.png", full_page=True) == tmp_path / "editor.png"
    assert target.calls == [{"path": str(tmp_path / "editor.png"), "full_page": True}]
    with pytest.raises(ValueError):
        docshots.take(target, "../README.png")
