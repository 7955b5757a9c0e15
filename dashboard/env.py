"""Strict parsing of settings from the environment.

A bad value must stop the process at start-up with a message naming the variable, not surface
later as a confusing runtime error in a worker.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _get(name: str, default: T, parse: Callable[[str], T], expected: str) -> T:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return parse(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not valid: expected {expected} ({exc})") from None


def _parse_bool(raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("not a boolean")


def env_bool(name: str, default: bool) -> bool:
    return _get(name, default, _parse_bool, "one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    def parse(raw: str) -> int:
        value = int(raw)
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}")
        return value

    return _get(name, default, parse, "an integer")


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    def parse(raw: str) -> float:
        value = float(raw)
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}")
        return value

    return _get(name, default, parse, "a number")


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_list(name: str, default: list[str]) -> list[str]:
    def parse(raw: str) -> list[str]:
        return [item.strip() for item in raw.split(",") if item.strip()]

    return _get(name, default, parse, "a comma-separated list")


def env_url(name: str, default: str | None, schemes: tuple[str, ...]) -> str | None:
    def parse(raw: str) -> str:
        if not raw:
            raise ValueError("empty")
        scheme = raw.split("://", 1)[0] if "://" in raw else ""
        if scheme not in schemes:
            raise ValueError(f"scheme must be one of {', '.join(schemes)}")
        return raw

    return _get(name, default, parse, "a URL")


def env_json(name: str, default: Any) -> Any:
    def parse(raw: str) -> Any:
        return json.loads(raw)

    return _get(name, default, parse, "JSON")
