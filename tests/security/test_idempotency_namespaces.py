"""Issue 19, item 10: a client's idempotency keys live in a namespace of their own, so a user cannot
pre-claim an internal start (a schedule's tick `schedule:…`, a webhook delivery `webhook:…`, a
sub-workflow's start `subflow:…`) by sending its key first. The key a client sends still works as
before: repeated, it answers the instance it started."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from workflows import runtime
from workflows.models import WorkflowInstance, WorkflowVersion

INTERNAL_KEYS = ("schedule:1:2026-12-01T00:00:00+00:00", "webhook:hook123:delivery-1", "subflow:9:child:1")


def start(client: Client, path: str, key: str) -> Any:
    return client.post(path, json.dumps({"input": {"n": 1}}), content_type="application/json",
                       headers={"Idempotency-Key": key})


@pytest.mark.parametrize("path", ["/api/workflows/hostile/instances", "/api/v1/workflows/hostile/instances"])
def test_client_keys_cannot_claim_internal_starts(admin_client_: Client, version: WorkflowVersion,
                                                  path: str) -> None:
    for key in INTERNAL_KEYS:
        first = start(admin_client_, path, key)
        assert first.status_code == 201, first.content
        # The client's own repeat still answers its instance...
        again = start(admin_client_, path, key)
        assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
        # ...but the internal start with the same text is a start of its own.
        internal = runtime.start_instance(version, {"n": 2}, idempotency_key=key)
        assert internal.pk != first.json()["id"]
        assert internal.input == {"n": 2}
    assert WorkflowInstance.objects.count() == 2 * len(INTERNAL_KEYS)


def test_bulk_keys_are_namespaced_too(admin_client_: Client, version: WorkflowVersion) -> None:
    key = INTERNAL_KEYS[1]
    response = admin_client_.post("/api/workflows/hostile/instances/bulk",
                                  json.dumps({"inputs": [{"n": 1}], "idempotency_keys": [key]}),
                                  content_type="application/json")
    assert response.status_code == 201, response.content
    internal = runtime.start_instance(version, {"n": 2}, idempotency_key=key)
    assert internal.pk != response.json()["instances"][0]["id"]


def test_the_longest_client_key_still_fits(admin_client_: Client, version: WorkflowVersion) -> None:
    key = "k" * 200
    first = start(admin_client_, "/api/v1/workflows/hostile/instances", key)
    assert first.status_code == 201, first.content
    assert start(admin_client_, "/api/v1/workflows/hostile/instances", key).json()["id"] == first.json()["id"]
