"""A streaming llm step in the live view (real browser, daphne, a real `ai` consumer): the inspector
shows the reply growing as partial messages arrive, then the committed output in its place."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import chain
from tests.e2e.test_live import open_instance
from tests.workflows.test_aiworker import start_ai
from workflows import runtime

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WORDS = [f"token{i}" for i in range(40)]
TEXT = " ".join(WORDS)
STREAMING = {"id": "ask", "type": "llm", "config": {
    "provider": "scripted", "prompt": "Tell me", "stream": True,
    # 40 chunks 0.1 s apart: the reply takes about 4 s to arrive.
    "script": [{"text": TEXT, "chunk_chars": len("token10 "), "chunk_delay_s": 0.1}]}}


def shown(page: Any) -> int:
    return page.evaluate("() => (document.querySelector('#insp-partial pre') || {textContent: ''}).textContent.length")


def test_the_inspector_shows_the_reply_growing_then_the_output(daphne_page: Any, login: Any, user_in: Any,
                                                                processes: Any, make_version: Any) -> None:
    page = daphne_page
    login(page, user_in("operators", "olga"))
    instance = runtime.start_instance(make_version(chain(STREAMING)), {})
    open_instance(page, instance)
    page.evaluate("steadyflowLive.select('ask')")
    start_ai(processes)

    page.wait_for_function("() => { const p = document.querySelector('#insp-partial pre');"
                           " return p && p.textContent.length > 0; }", timeout=30_000)
    first = shown(page)
    assert TEXT.startswith(page.locator("#insp-partial pre").inner_text())
    page.wait_for_function(f"() => {{ const p = document.querySelector('#insp-partial pre');"
                           f" return p && p.textContent.length > {first}; }}", timeout=30_000)
    assert page.evaluate("steadyflowLive.renderedState('ask')") == "running"

    page.wait_for_function("() => steadyflowLive.renderedState('ask') === 'succeeded'", timeout=30_000)
    page.locator("#insp-partial").wait_for(state="detached")
    output = page.locator("#insp-runs details.run pre.json").nth(1)
    page.wait_for_function("(t) => [...document.querySelectorAll('#insp-runs details.run pre.json')]"
                           ".some((p) => p.textContent.includes(t))", arg=TEXT)
    assert TEXT in output.inner_text()

    log = page.evaluate("steadyflowLive.partialLog")
    chars = [entry["chars"] for entry in log if entry["node"] == "ask"]
    assert len(chars) >= 2 and chars == sorted(chars)
    assert len(chars) < len(WORDS), "partial replies are coalesced, not one message per chunk"
    # Partial replies are not events: the page's event log holds only what the server committed.
    assert page.evaluate("steadyflowLive.store.events.every((e) => !('text' in (e.payload || {})))")
    assert page.js_errors == []
