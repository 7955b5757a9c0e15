"""Small demo endpoints that the example workflows call when run locally (`make run` enables them
and allow-lists this server for the http node). Off unless STEADYFLOW_DEMO_ENDPOINTS is set."""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

# What the ledger saw, by idempotency key: a repeated request returns the first answer.
_LEDGER: dict[str, dict[str, object]] = {}


@require_http_methods(["GET"])
def research(request: HttpRequest, topic_kind: str) -> JsonResponse:
    query = request.GET.get("q", "")
    items = {
        "market": [{"title": f"{query} market size grows 12%", "source": "demo"}],
        "news": [{"title": f"New {query} plant announced", "source": "demo"}],
    }.get(topic_kind)
    if items is None:
        return JsonResponse({"message": f"unknown research kind {topic_kind!r}"}, status=404)
    return JsonResponse({"kind": topic_kind, "query": query, "items": items})


@csrf_exempt
@require_http_methods(["POST"])
def ledger(request: HttpRequest, action: str) -> JsonResponse:
    key = request.headers.get("Idempotency-Key", "")
    if key and key in _LEDGER:
        return JsonResponse({**_LEDGER[key], "replayed": True})
    try:
        body = json.loads(request.body or b"{}")
    except json.JSONDecodeError:
        return JsonResponse({"message": "body is not JSON"}, status=400)
    answer = {"action": action, "ok": True, "amount": body.get("amount"), "idempotency_key": key}
    if key:
        _LEDGER[key] = answer
    return JsonResponse(answer)
