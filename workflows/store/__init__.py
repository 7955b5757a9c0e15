"""Stores: the only code that reads and writes instance, step, event and checkpoint rows on the
hot path. `get_store()` picks one by STEADYFLOW["STORE"] and the database:

- "sql" (the default): hand-written statements per database (postgres.py, sqlite.py, sharing
  sql.py; the text of every statement in statements.py);
- "orm": the Django ORM (orm.py), the reference implementation the SQL stores are tested against.
"""

from __future__ import annotations

from workflows.store.orm import OrmStore, StaleWrite, is_spent, mark_spent

_stores: dict[tuple[str, str], OrmStore] = {}


def get_store(name: str | None = None) -> OrmStore:
    from django.conf import settings
    from django.db import connection

    choice = name or settings.STEADYFLOW.get("STORE", "sql")
    key = (choice, connection.vendor)
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = _make(choice, connection.vendor)
    return store


def _make(choice: str, vendor: str) -> OrmStore:
    if choice == "orm":
        return OrmStore()
    if vendor == "postgresql":
        from workflows.store.postgres import PostgresStore

        return PostgresStore()
    if vendor == "sqlite":
        from workflows.store.sqlite import SqliteStore

        return SqliteStore()
    return OrmStore()


__all__ = ["OrmStore", "StaleWrite", "get_store", "is_spent", "mark_spent"]
