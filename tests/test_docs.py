"""The README and docs/ stay true: every internal link resolves (file and heading), every docs/ page is
linked from the README, and every setting docs/configuration.md documents is one the code still reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")

CODE_DIRS = ("workflows", "dashboard", "scripts", "bench")  # where a setting is read (settings.py, mostly)


def prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for _, line in prose(path) if re.match(r"^#{1,6} ", line)}


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link and image outside code (fenced blocks and `spans`)."""
    return [(number, target) for number, line in prose(path)
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line))]


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not linked.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where} (no heading #{anchor} in {linked.relative_to(root)})")
    return problems


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_internal_link_resolves(doc: Path) -> None:  # (not `page`: pytest-playwright's fixture)
    assert not broken_links(doc), "\n".join(broken_links(doc))


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(ROOT / "README.md")}
    unlinked = [str(p.relative_to(ROOT)) for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs/ pages the README does not link: {unlinked}"


def test_the_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250, "the reference belongs in docs/"


def documented_settings() -> set[str]:
    text = (ROOT / "docs" / "configuration.md").read_text()
    in_table = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", text, re.M))
    return in_table | set(re.findall(r"\bSTEADYFLOW_[A-Z0-9_]*[A-Z0-9]\b", text))


def code_text() -> str:
    files = [ROOT / "manage.py"] + [p for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*.py"))]
    return "\n".join(p.read_text() for p in files if "migrations" not in p.parts)


def unread(documented: set[str], code: str) -> list[str]:
    """The documented names no string literal in the code spells."""
    return sorted(name for name in documented if not re.search(rf"[\"']{name}[\"']", code))


def test_every_documented_setting_is_read_by_the_code() -> None:
    documented = documented_settings()
    assert len(documented) > 30, "docs/configuration.md's table was not found"
    missing = unread(documented, code_text())
    assert not missing, f"documented in docs/configuration.md but read nowhere in the code: {missing}"


def test_a_broken_link_and_an_unread_setting_are_found(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    doc.write_text("[ok](other.md#a-section) [gone](missing.md) [no anchor](other.md#nowhere)\n"
                    "```\n[in code](not-a-link.md)\n```\n")
    problems = broken_links(doc, tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == ["missing.md (no such file)",
                                                      "other.md#nowhere (no heading #nowhere in other.md)"]
    code = 'STEADYFLOW = {"TTL_S": env.number("STEADYFLOW_TTL_S", 3600)}'
    assert unread({"STEADYFLOW_TTL_S", "STEADYFLOW_GONE"}, code) == ["STEADYFLOW_GONE"]
