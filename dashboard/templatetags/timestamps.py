"""One way to show a moment on every page: `{{ value|stamp }}` → `2026-12-01 15:04:05 UTC`.

ISO-like (date, 24-hour time to the second) with the time zone named, in the site's TIME_ZONE; the
same text whatever the language. Loaded on every template (settings: TEMPLATES builtins).
"""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format

register = template.Library()

STAMP_FORMAT = "Y-m-d H:i:s T"


@register.filter
def stamp(value: datetime | None) -> str:
    if not isinstance(value, datetime):
        return ""
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return date_format(value, STAMP_FORMAT)
