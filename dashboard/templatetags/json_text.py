"""`{{ value|json_text }}`: a stored JSON value shown as JSON (indented, keys in their order), never as
Python's repr (`{'ticket': ...}`, True, None). For <pre class="json"> blocks on the settings pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def json_text(value: Any, indent: int = 2) -> str:
    # Autoescaped by the template like any text; default=str: a stored value is JSON already, but a
    # date or a Decimal handed in by mistake must not break the page.
    return json.dumps(value, indent=indent or None, ensure_ascii=False, default=str)
