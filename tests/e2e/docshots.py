"""Pictures for the README and docs/ (docs/screenshots/), taken only when asked for.

`make screenshots` sets STEADYFLOW_SCREENSHOTS=1 and runs the tests marked `screenshots` (tests/conftest.py
marks every test that takes the `doc_shot` fixture). Any other run takes no picture: `make test` never
rewrites a tracked file, and a picture changes only when someone means to change it (then looks at it).

    doc_shot(page, "editor.png")                        # the viewport
    doc_shot(page.locator("#first-run"), "first-run.png")  # one element
    doc_shot(page, "instance.png", full_page=True)       # any keyword of Playwright's screenshot()

tests/test_screenshots.py checks that every picture the README and docs/*.md show is here, that every file
here is shown somewhere, and that no test but this module writes here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ASKED = "STEADYFLOW_SCREENSHOTS"


def asked_for() -> bool:
    return os.environ.get(ASKED, "") not in ("", "0")


def take(target: Any, name: str, **screenshot_kwargs: Any) -> Path | None:
    """Write docs/screenshots/<name> from a Playwright page or locator when pictures were asked for."""
    if not asked_for():
        return None
    if "/" in name or not name.endswith(".png"):
        raise ValueError(f"a picture is a plain .png name in docs/screenshots: {name!r}")
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    target.screenshot(path=str(path), **screenshot_kwargs)
    # A blank or failed capture is a few hundred bytes; a real page is tens of kilobytes.
    assert path.stat().st_size > 5_000, f"{path} is suspiciously small ({path.stat().st_size} bytes)"
    return path


@pytest.fixture
def doc_shot() -> Callable[..., Path | None]:
    return take
