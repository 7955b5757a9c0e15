"""One structured log line per HTTP request (logger `steadyflow.access`, INFO), in place of daphne's
plain access log (`make run` and the Docker image start daphne with `-v 0`, which turns that off):
method, path without its query string, status, duration and client address. Never headers, cookies,
query strings or bodies (tokens travel in them)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from dashboard.database_away import database_away

log = logging.getLogger("steadyflow.access")


def _log(request: HttpRequest, response: HttpResponseBase, started: float, began: float) -> None:
    if database_away.down and response.status_code != 503:
        database_away.answered(began)  # the first request begun after the database came back
    if log.isEnabledFor(logging.INFO):
        log.info("%s %s %s", request.method, request.path, response.status_code,
                 extra={"method": request.method, "path": request.path, "status": response.status_code,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                        "client": request.META.get("REMOTE_ADDR", "")})


class AccessLogMiddleware:
    """Sync and async (daphne serves the site through the async chain: no thread hop added here)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        started, began = time.perf_counter(), time.monotonic()
        response = self.get_response(request)
        _log(request, response, started, began)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        started, began = time.perf_counter(), time.monotonic()
        awaitable: Awaitable[HttpResponseBase] = self.get_response(request)
        response = await awaitable
        _log(request, response, started, began)
        return response
