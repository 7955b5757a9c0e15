"""Model fields."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

from django.db import models
from django.db.models.query_utils import DeferredAttribute
from django.utils.functional import cached_property


class TolerantDecimalField(models.DecimalField):
    """A DecimalField whose rows always load, whatever the column holds.

    SQLite does not enforce max_digits, so a value past it (a budget of 1e30, saved before graph numbers
    were bounded) is stored, and Django's SQLite converter then fails to quantize it with a context of
    max_digits precision: every query loading the row raised InvalidOperation, and every page listing
    the instance answered 500. Reading uses a context wide enough for any finite stored value; writing
    converts floats exactly as DecimalField does. The schema is unchanged, so migrations see a plain
    DecimalField (deconstruct).
    """

    @cached_property
    def context(self) -> decimal.Context:
        # 400 digits hold any finite double (at most ~1.8e308) with the field's decimal places.
        return decimal.Context(prec=max(self.max_digits or 0, 400))

    def to_python(self, value: Any) -> Any:
        if isinstance(value, float):
            value = decimal.Context(prec=self.max_digits).create_decimal_from_float(value)
        return super().to_python(value)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.DecimalField", args, kwargs


# How an EncryptedTextField's value is exported (dumpdata): encrypted with the credentials keys, marked so
# that loaddata decrypts it back (a fixture may also give a value in clear, unmarked).
EXPORTED_PREFIX = "encrypted:"


class EncryptedTextField(models.TextField):
    """Text encrypted at rest with the credentials keys (Fernet, STEADYFLOW_CREDENTIALS_KEY; see
    workflows/credentials/store.py): the model attribute holds the clear value, the column only the token.

    For secrets the server must read back in clear, where a hash would not do: a webhook's HMAC key
    signs and verifies requests. Tokens differ on every save, so the column cannot be filtered on;
    `manage.py rotate_credentials` re-encrypts these columns with the first key, as it does credentials.
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if not value:
            return value
        from workflows.credentials.crypto import decrypt

        return decrypt(value)

    def value_to_string(self, obj: Any) -> str:
        """What `dumpdata` (any serializer) writes: the value encrypted, marked, never in clear."""
        value = self.value_from_object(obj)
        if not value:
            return str(value or "")
        from workflows.credentials.crypto import encrypt

        return EXPORTED_PREFIX + encrypt(value)

    def to_python(self, value: Any) -> Any:
        """A value `loaddata` reads: an exported (encrypted, marked) one is decrypted."""
        if isinstance(value, str) and value.startswith(EXPORTED_PREFIX):
            from workflows.credentials.crypto import decrypt

            return decrypt(value[len(EXPORTED_PREFIX):])
        return super().to_python(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if not value:
            return value
        from workflows.credentials.crypto import encrypt

        return encrypt(value)


# How a loaded instance's current context is read: store/state_reads.py registers itself here when it
# is imported (workflows/apps.py imports it at start), so this leaf imports nothing of the store.
CONTEXT_LOADER: list[Callable[[Any], Any]] = []


class CurrentContext(DeferredAttribute):
    """`instance.context` of a loaded instance: rebuilt on first read from the newest snapshot and
    the state deltas after it (or taken from this process's cache of what it last committed), then
    kept on the object. An instance built in code (not loaded) holds what it was given."""

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        if instance is None:
            return self
        data = instance.__dict__
        if "context" not in data:
            data["context"] = CONTEXT_LOADER[0](instance)
        return data["context"]


class ContextField(models.JSONField):
    """WorkflowInstance.context: a JSONField whose value on a loaded instance is the current context,
    not the column (see CurrentContext). The schema is a plain JSONField (deconstruct)."""

    descriptor_class = CurrentContext

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
