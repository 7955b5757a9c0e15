"""Every node type's palette glyph is in a font this machine's browser has (Debian's chromium draws
from fontconfig's fonts: DejaVu at least). A glyph no font covers renders as an empty box (issue 22:
the sub-workflow's ⧉)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from workflows.engine.nodes import known_kinds


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig (fc-list) is not installed")
def test_every_node_icon_has_a_font() -> None:
    missing = []
    for kind in known_kinds().values():
        for char in kind.icon:
            found = subprocess.run(["fc-list", f":charset={ord(char):x}"], capture_output=True, text=True,
                                   check=True).stdout.strip()
            if not found:
                missing.append(f"{kind.name}: {char!r} (U+{ord(char):04X})")
    assert not missing, f"no installed font draws these node icons: {missing}"
