"""Encrypting and decrypting secrets at rest: the leaf of workflows/credentials/ that depends on the
settings (and the engine's errors) only, so model fields can use it without importing the models.

Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`) under MultiFernet: the keys come from
STEADYFLOW_CREDENTIALS_KEY (comma-separated; the first encrypts, every one decrypts).
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from workflows.engine.errors import ConfigError


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def fernet() -> MultiFernet:
    return _fernet(tuple(settings.STEADYFLOW["CREDENTIALS_KEYS"]))


def encrypt(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        # Never the token or a value in the message: the name of the setting to fix.
        raise ConfigError("a credential cannot be decrypted with the keys in STEADYFLOW_CREDENTIALS_KEY "
                          "(was a key dropped before `manage.py rotate_credentials` ran?)") from None
