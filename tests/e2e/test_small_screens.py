"""Pages at a phone's width (390 px): the dashboard, instance, review and list pages never scroll
sideways (a wide table scrolls inside its box, the navigation wraps); the editor says it needs a wider
screen instead of drawing a canvas 0 px wide."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_pages import halted_instance
from workflows.models import ReviewItem

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def sideways(page: Any) -> dict[str, Any]:
    """How far the page scrolls sideways, and the widest elements if it does (for the failure message)."""
    return page.evaluate("""() => {
        const width = innerWidth, scroll = document.scrollingElement.scrollWidth;
        const wide = scroll <= width ? [] : [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > width + 1)
            .slice(0, 8).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className);
        return {width, scroll, wide};
    }""")


def assert_fits(page: Any, path: str) -> None:
    page.goto(path)
    page.wait_for_load_state("load")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    got = sideways(page)
    assert got["scroll"] <= got["width"], f"{path} scrolls sideways at {got['width']} px: {got}"


def test_pages_fit_a_phone_and_the_editor_asks_for_a_wider_screen(page: Any, make_user: Any, login: Any,
                                                                  redis_conn: Any) -> None:
    inst = halted_instance()
    item = ReviewItem.objects.get(instance=inst, status="open")
    login(page, make_user("olga", "operators", "designers"))
    page.set_viewport_size(PHONE)

    for path in ("/", f"/instances/{inst.pk}/", "/instances/", "/review/", f"/review/{item.pk}/", "/workflows/"):
        assert_fits(page, path)
    # The navigation is all there, wrapped rather than cut.
    for name in ("Dashboard", "Workflows", "Instances"):
        box = page.locator(f".topbar nav a:text-is('{name}')").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name

    slug = inst.version.definition.slug
    assert_fits(page, f"/workflows/{slug}/edit/")
    assert page.is_visible("#editor-narrow")
    assert "needs a wider screen" in page.text_content("#editor-narrow")
    assert not page.is_visible("#cy")
    # At a desktop's width the message is gone and the canvas is there.
    page.set_viewport_size({"width": 1280, "height": 800})
    assert not page.is_visible("#editor-narrow")
    assert page.locator("#cy").bounding_box()["width"] > 400
    assert page.js_errors == []
