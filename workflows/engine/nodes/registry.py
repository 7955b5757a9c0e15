"""The node kinds by name: each kind's module registers itself here when workflows/engine/nodes/
imports it. Its own module so that the kinds import the registry and not their package (whose
__init__ imports them): no import cycle."""

from __future__ import annotations

from workflows.engine.nodes.base import NodeKind

_REGISTRY: dict[str, NodeKind] = {}


def register(kind: type[NodeKind]) -> type[NodeKind]:
    _REGISTRY[kind.name] = kind()
    return kind


def get_kind(name: str) -> NodeKind:
    return _REGISTRY[name]


def known_kinds() -> dict[str, NodeKind]:
    return dict(_REGISTRY)
