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


def unmeasured_kinds() -> list[str]:
    """The kinds whose step's started -> finished is no run time (the dashboard's and the daily charts'
    percentiles leave them out): structural nodes take none, and a timer, a human task or a child instance
    is waiting, not work (a person's four minutes are no step's run time)."""
    return sorted(name for name, kind in _REGISTRY.items()
                  if kind.structural or kind.awaits_person or kind.starts_children or not kind.measured)
