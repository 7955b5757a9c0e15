"""Structured logs: every process logs through the standard library, rendered by structlog as JSON
lines (LOG_FORMAT=json) or readable lines (LOG_FORMAT=console, what `make run` uses).

Django configures logging in every process (web, workers, the ai consumer, the scheduler and every
management command) from settings.LOGGING, which names `formatter` below. Each line carries the time,
level, logger, the process kind and pid, the message, and — while a worker runs a step — the step's
trace id, instance, node, visit, attempt and worker, read from `observe.current_step` only when a line
is actually written (the hot path sets one context variable per step and formats nothing).

Secrets stay out: only the `extra` fields of simple types are added, and never ones whose names look
like credentials; a request object (Django attaches one to its request log records) is reduced to
its method and path, without query string, headers or body.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

# Attributes every LogRecord has: not `extra` fields.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_SECRETISH = ("secret", "password", "token", "authorization", "cookie", "api_key", "apikey", "credential")
_SIMPLE = (str, int, float, bool, type(None))

PROCESS_KIND = "command"


def process_kind(argv: list[str] | None = None) -> str:
    """web, worker, scheduler or command: from how this process was started."""
    args = sys.argv if argv is None else argv
    if "daphne" in (args[0] if args else ""):  # .venv/bin/daphne, python -m daphne
        return "web"
    command = args[1] if len(args) > 1 else ""
    if command == "run_worker":
        return "worker"
    if command == "run_scheduler":
        return "scheduler"
    if command == "runserver":
        return "web"
    return "command"


def _add_step(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # Looked up, not imported: logging is configured before Django's apps load (the runtime package
    # imports the models), and until the runtime is imported no step can be running anyway.
    observe = sys.modules.get("workflows.runtime.observe")
    claim = observe.current_step.get() if observe is not None else None
    if observe is not None and claim is not None:
        # An `extra` naming another step (added before this) wins over the running step's fields.
        for name, value in observe.step_fields(claim).items():
            event.setdefault(name, value)
    return event


def _add_extras(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    record: logging.LogRecord | None = event.get("_record")
    if record is None:
        return event
    for name, value in record.__dict__.items():
        if name in _STANDARD or name.startswith("_") or name in event:
            continue
        if name == "request":
            method_ = getattr(value, "method", None)
            path = getattr(value, "path", None)
            if isinstance(method_, str) and isinstance(path, str):
                event["method"], event["path"] = method_, path
            continue
        if isinstance(value, _SIMPLE) and not any(word in name.lower() for word in _SECRETISH):
            event[name] = value
    return event


def _add_process(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event["process"] = PROCESS_KIND
    event["pid"] = os.getpid()
    return event


def formatter(log_format: str = "json") -> logging.Formatter:
    """The logging.Formatter settings.LOGGING uses (a dictConfig `()` factory)."""
    global PROCESS_KIND
    PROCESS_KIND = process_kind()
    renderer: Any
    if log_format == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    else:
        renderer = structlog.processors.JSONRenderer()
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _add_extras,
            _add_step,
            _add_process,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )


LOG_FORMATS = ("json", "console")
