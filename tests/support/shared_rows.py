"""Rows built once for a module of tests, rolled back at its end.

Some modules run hundreds of tests over the same setup (tests/security/test_permissions.py: every role ×
endpoint × action on one "world" of users, instances, a credential and a token). Building that setup for
every test cost more than the tests. Here it is built once, inside a transaction of its own that stays open
for the module; each test's own transaction (pytest-django's `db`, a Django TestCase's atomic) is then a
savepoint inside it, rolled back after the test, so every test starts from the rows as built, whatever the
previous test wrote. At the module's end the outer transaction is rolled back too: nothing is ever
committed, as before, and on-commit callbacks never run (as in any `db` test).

Only for `db` tests: a transactional test (`transactional_db`, `live_server`) commits, and a commit inside
the open outer transaction would not reach other connections. tests/conftest.py refuses to start a
transactional test while such a transaction is open (pytest-django runs transactional tests after the
others, so this only happens with a transactional test in the same module under a module-grouping
pytest-xdist distribution; `make test` uses `--dist load`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import transaction

T = TypeVar("T")


def built_once(django_db_blocker: Any, build: Callable[[], T]) -> Iterator[T]:
    """A module-scoped fixture's body: `yield from built_once(django_db_blocker, build)`, with the fixture
    requesting `django_db_setup` (the test database) and `django_db_blocker`. `build` should return plain
    values (primary keys), and the per-test fixture read the rows afresh: model objects outlive a test's
    rollback in memory (a cached permission, a changed field), the rows do not."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        # Marked as Django's TestCase marks its own transactions, so a durable block inside the build (or a
        # test) is allowed, as it would be in a test's transaction.
        outer._from_testcase = True
        outer.__enter__()
        try:
            value = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield value
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
