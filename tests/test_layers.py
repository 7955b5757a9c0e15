"""One-way layers (issue 20), enforced on the import graph of workflows/ and dashboard/ (tests/layers.py
reads it with `ast`, imports inside function bodies included).

The rules: the engine imports nothing of the project; workflows/ never imports dashboard/; the store
imports nothing of the runtime; outside workflows/runtime/ only its facade is imported; the v1 API uses
services, not the older view modules; no underscore name is imported across modules; every import points
down tests/layers.py's LAYERS; no import cycles between modules.

KNOWN lists what the code does not meet yet, rule by rule, each with why. It may only shrink: an entry
that is no longer a violation fails the test too (remove it), so a fixed boundary cannot silently
break again. A new violation is fixed, not added here.
"""

from __future__ import annotations

import pytest

from tests import layers
from tests.layers import Graph, Import

KNOWN: dict[str, list[str]] = {
    "engine": [],
    "workflows-dashboard": [],
    "store-runtime": [],
    "runtime-facade": [],
    "v1-views": [],
    "underscore": [],
    "layers": [],
    "cycles": [],
}


def compare(found: list[str], known: list[str]) -> tuple[list[str], list[str]]:
    """(violations not in the known list, known entries that are no longer violations)."""
    return sorted(set(found) - set(known)), sorted(set(known) - set(found))


@pytest.fixture(scope="module")
def graph() -> Graph:
    return layers.read_graph()


@pytest.mark.parametrize("rule", sorted(layers.RULES))
def test_the_import_graph_keeps_the_rule(graph: Graph, rule: str) -> None:
    new, stale = compare(layers.RULES[rule](graph), KNOWN[rule])
    assert not new, f"{rule}: imports that cross a boundary (fix them; KNOWN is not for new ones):\n" + "\n".join(new)
    assert not stale, f"{rule}: KNOWN lists what is no longer a violation; remove:\n" + "\n".join(stale)


def test_every_module_is_placed_in_a_layer(graph: Graph) -> None:
    unplaced = sorted({layers.group(m) for m in graph.modules} - set(layers.RANK))
    assert not unplaced, f"groups tests/layers.py's LAYERS does not place: {unplaced}"


def test_the_graph_is_read_with_imports_inside_functions(graph: Graph) -> None:
    hidden = [i for i in graph.imports if i.in_function]
    assert hidden, "no import inside a function body was found: the reader misses them"
    assert any(i.source == "workflows.apps" and i.target == "workflows.checks" for i in hidden)


# --- the checker fails when a boundary is crossed on purpose ---------------------------------------

def fake(*edges: tuple[str, str], names: tuple[str, ...] = ()) -> Graph:
    imports = tuple(Import(s, t, names) for s, t in edges)
    return Graph(frozenset({m for e in edges for m in e}), imports)


@pytest.mark.parametrize(("rule", "edge"), [
    ("engine", ("workflows.engine.graph", "workflows.models")),
    ("workflows-dashboard", ("workflows.operators.review", "dashboard.security.permissions")),
    ("store-runtime", ("workflows.store.sql", "workflows.runtime.config")),
    ("runtime-facade", ("workflows.workers.aiworker", "workflows.runtime.claiming")),
    ("v1-views", ("dashboard.api.v1.reviews", "dashboard.pages.review_views")),
    ("layers", ("workflows.adapters.breakers", "workflows.scheduler.reconciler")),
    ("layers", ("workflows.workers.dispatch", "workflows.scheduler.reconciler")),
])
def test_a_crossed_boundary_is_found(rule: str, edge: tuple[str, str]) -> None:
    assert layers.RULES[rule](fake(edge)), f"{rule} misses {edge}"


def test_the_allowed_imports_are_not_violations() -> None:
    allowed = fake(("workflows.workers.aiworker", "workflows.runtime"),
                   ("workflows.scheduler.reconciler", "workflows.workers.dispatch"),
                   ("dashboard.pages.views", "workflows.operators.report"),
                   ("workflows.engine.graph", "workflows.engine.errors"))
    assert all(not rule(allowed) for rule in layers.RULES.values())


def test_an_underscore_name_across_modules_is_found() -> None:
    graph = fake(("workflows.workers.dispatch", "workflows.runtime.claiming"), names=("_lease",))
    assert layers.no_underscore_names_across_modules(graph) == ["workflows.workers.dispatch -> "
                                                               "workflows.runtime.claiming._lease"]
    via_attribute = Graph(frozenset(), (), (("dashboard.pages.views", "workflows.models", "_cache"),))
    assert layers.no_underscore_names_across_modules(via_attribute)


def test_a_cycle_is_found_also_through_a_function_body() -> None:
    graph = Graph(frozenset(), (Import("workflows.a", "workflows.b"),
                                Import("workflows.b", "workflows.c", in_function=True),
                                Import("workflows.c", "workflows.a")))
    assert layers.cycles(graph) == ["workflows.a | workflows.b | workflows.c"]
    type_only = Graph(frozenset(), (Import("workflows.a", "workflows.b"),
                                    Import("workflows.b", "workflows.a", type_only=True)))
    assert layers.cycles(type_only) == []


def test_a_fixed_violation_left_in_the_known_list_fails() -> None:
    fixed = "workflows.store.sql -> workflows.runtime.unit"
    assert compare(layers.store_imports_nothing_of_runtime(fake()), [fixed]) == ([], [fixed])
