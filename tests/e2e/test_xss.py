"""Stored XSS, in a real browser: markup typed into every user-controlled field that a page shows (a
workflow's name and description, a node's label, an llm prompt, a human task's prompt and input
descriptions, a version message, the start input, the context, a step's error, an operator's note) is
shown as text on every page, never parsed as markup.

The Content-Security-Policy would block an injected inline handler even if escaping failed, so the
probe does not rely on a script running: it looks for the payload's *elements* in the DOM
(`.xss-probe`), which exist only if the page parsed the text as HTML (through innerHTML, an unescaped
template or a `|safe`). Each page must also show the payload as text somewhere, so a page that simply
dropped the field cannot pass for a safe one.
"""

from __future__ import annotations

from typing import Any

import pytest

from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import ReviewItem, WorkflowInstance

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAYLOAD = ('<img class="xss-probe" src="/static/none.png"><b class="xss-probe">bold</b>'
           '"\'><svg class="xss-probe"></svg><script class="xss-probe">window.__xss = 1</script>')
TEXT_MARK = '<b class="xss-probe">bold</b>'  # how the payload reads when shown as text

GRAPH = {
    "input": {"type": "object", "properties": {
        "note": {"type": "string", "description": PAYLOAD, "default": PAYLOAD}}},
    "nodes": [
        {"id": "start", "type": "start", "label": PAYLOAD},
        {"id": "ask", "type": "human", "label": PAYLOAD,
         "config": {"prompt": PAYLOAD + " {{ input.note }}",
                    "inputs": {"reason": {"type": "string", "description": PAYLOAD, "title": PAYLOAD}}}},
        {"id": "end", "type": "end", "label": PAYLOAD},
    ],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}


def seed() -> tuple[WorkflowInstance, ReviewItem]:
    version = save_version("xss-probe", GRAPH, name=PAYLOAD, description=PAYLOAD, message=PAYLOAD)
    instance = runtime.start_instance(version, {"note": PAYLOAD, PAYLOAD: PAYLOAD})
    WorkflowInstance.objects.filter(pk=instance.pk).update(context={"summary": PAYLOAD, PAYLOAD: [PAYLOAD]})
    item = ReviewItem.objects.get(instance=instance)
    return instance, item


def probe(page: Any, path: str, *, ready: str) -> dict[str, Any]:
    page.goto(path)
    page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    return dict(page.evaluate("""(mark) => ({
        probes: document.querySelectorAll('.xss-probe').length,
        ran: window.__xss === 1,
        shown: document.body.innerText.includes(mark) ||
               [...document.querySelectorAll('input, textarea')].some(f => f.value.includes(mark)),
    })""", TEXT_MARK))


def test_markup_in_every_field_is_shown_as_text_on_every_page(daphne_page: Any, make_user: Any,
                                                              login: Any) -> None:
    page = daphne_page
    instance, item = seed()
    login(page, make_user("ola", "operators", "designers"))

    pages = {
        "dashboard": ("/", "main"),
        "workflow list": ("/workflows/", "main"),
        "workflow page": ("/workflows/xss-probe/", "main"),
        "instance list": ("/instances/", "main"),
        "instance page": (f"/instances/{instance.pk}/", "#inst-status"),
        "review list": ("/review/", "main"),
        "review item": (f"/review/{item.pk}/", "main"),
    }
    seen = {name: probe(page, path, ready=ready) for name, (path, ready) in pages.items()}
    for name, result in seen.items():
        assert result["probes"] == 0, f"{name}: the payload was parsed as markup"
        assert not result["ran"], f"{name}: the payload's script ran"
    shown = {name for name, result in seen.items() if result["shown"]}
    # Where the payload must be visible as text: every page that lists or shows this workflow's name,
    # its instance or its review item.
    assert {"workflow list", "workflow page", "review item"} <= shown, seen

    # The editor draws labels on a canvas and shows configs in its side panel: no probe either.
    editor = probe(page, "/workflows/xss-probe/edit/", ready="#cy canvas")
    assert editor["probes"] == 0 and not editor["ran"]
    assert page.js_errors == []
