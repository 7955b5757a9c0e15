"""Keyset pagination of the v1 lists: newest first, `limit` at a time, with an opaque `next_cursor`.

A cursor continues below the last id seen, so a page never repeats or skips a row when rows are added
while a client pages through. It is opaque (base64 of `id:N`) so that the API may change what it
holds without clients building cursors of their own.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from ninja import Field

from dashboard.api.v1.problems import Problem

PAGE_MOST = 200
M = TypeVar("M", bound=Model)


def cursor_field() -> Any:
    return Field(None, max_length=100, description="`next_cursor` of the previous page.")


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The id a cursor continues below; a 422 problem naming `query.cursor` for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = text.partition(":")
        if kind != "id" or not value.isascii() or not value.isdecimal() or len(value) > 18:
            raise ValueError(text)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise Problem(422, "invalid cursor: pass the next_cursor of the previous page unchanged",
                      [{"field": "query.cursor", "message": "not a cursor this API made"}]) from None


def newest_first(rows: QuerySet[M], cursor: str | None, limit: int,
                 as_json: Callable[[M], dict[str, Any]]) -> dict[str, Any]:
    """One page of `rows`, newest (highest id) first: {"items": [...], "next_cursor": str | None}."""
    if cursor:
        rows = rows.filter(pk__lt=decode_cursor(cursor))
    page = list(rows.order_by("-id")[:limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {"items": [as_json(row) for row in page], "next_cursor": encode_cursor(page[-1].pk) if more else None}
