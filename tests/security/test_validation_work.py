"""Issue 19, item 8: validation cannot be made to burn CPU. A graph carries a bounded number of
template placeholders and conditions (limits.MAX_GRAPH_EXPRESSIONS), counted before any parse, so a
/validate request with hundreds of thousands of them answers a fast 4xx naming the limit; and parses
are cached, failures too, so the same bad expression costs one parse."""

from __future__ import annotations

import json
import string
import time
from itertools import product
from typing import Any

import pytest
from django.test import Client

from tests.conftest import chain
from workflows.engine import expressions, limits
from workflows.engine.validation import validate_graph

COUNT = 300_000


def names() -> list[str]:
    letters = string.ascii_letters
    out = ["".join(p) for n in (1, 2, 3, 4) for p in product(letters, repeat=n)]
    return out[:COUNT]


def flood(broken: bool = False) -> dict[str, Any]:
    """An http node whose body holds COUNT distinct placeholders (each would be a parse)."""
    text = "".join(f"{{{{{name}{'(' if broken else ''}}}}}" for name in names())
    return chain({"id": "work", "type": "http", "config": {"url": "http://example.com", "json": {"t": text}}})


@pytest.mark.parametrize("path", ["/api/validate", "/api/v1/validate"])
@pytest.mark.parametrize("broken", [False, True])
def test_a_flood_of_placeholders_answers_a_fast_4xx_naming_the_limit(admin_client_: Client, path: str,
                                                                    broken: bool) -> None:
    body = json.dumps({"graph": flood(broken)})
    started = time.monotonic()
    response = admin_client_.post(path, body, content_type="application/json")
    took = time.monotonic() - started
    assert response.status_code == 413, response.content[:300]
    text = response.content.decode()
    assert "MAX_GRAPH_EXPRESSIONS" in text and f"{limits.MAX_GRAPH_EXPRESSIONS:,}" in text
    assert took < 5, f"{took:.1f} s"


def test_at_the_bound_the_graph_validates_and_past_it_is_refused_by_save_too() -> None:
    def with_count(n: int) -> dict[str, Any]:
        return chain({"id": "work", "type": "http", "config": {
            "url": "http://example.com", "json": {"t": "{{ input.a }}" * n}}})

    assert validate_graph(with_count(limits.MAX_GRAPH_EXPRESSIONS - 10)) == []
    (issue,) = validate_graph(with_count(limits.MAX_GRAPH_EXPRESSIONS + 1))
    assert "MAX_GRAPH_EXPRESSIONS" in issue.message


def test_conditions_count_with_placeholders() -> None:
    conditions = 4_000
    placeholders = limits.MAX_GRAPH_EXPRESSIONS - conditions + 1
    graph = chain({"id": "work", "type": "http", "config": {
        "url": "http://example.com", "json": {"t": "{{ input.a }}" * placeholders}}})
    graph["edges"] += [{"source": "work", "target": "end", "when": f"n == {i}"} for i in range(conditions)]
    (issue,) = validate_graph(graph)
    assert "MAX_GRAPH_EXPRESSIONS" in issue.message
    graph["edges"].pop()
    assert not any("MAX_GRAPH_EXPRESSIONS" in issue.message for issue in validate_graph(graph))


def test_a_failing_parse_is_cached() -> None:
    expression = "x + (  # unique-failure-7f3a"
    expressions.parse_cache_clear()
    for _ in range(3):
        with pytest.raises(expressions.ExpressionError):
            expressions.parse(expression)
    info = expressions.parse_cache_info()
    assert info.misses == 1 and info.hits == 2
