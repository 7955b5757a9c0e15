"""Node kinds, registered by name. One module per kind."""

from __future__ import annotations

from workflows.engine.nodes.base import EngineConfig, NodeKind, NodeResult, StepCall

_REGISTRY: dict[str, NodeKind] = {}


def register(kind: type[NodeKind]) -> type[NodeKind]:
    _REGISTRY[kind.name] = kind()
    return kind


def get_kind(name: str) -> NodeKind:
    return _REGISTRY[name]


def known_kinds() -> dict[str, NodeKind]:
    return dict(_REGISTRY)


def _load_builtin() -> None:
    from workflows.engine.nodes import (  # noqa: F401
        end,
        http,
        human,
        llm,
        mcp,
        planner,
        python,
        router,
        start,
        subworkflow,
        wait,
    )


_load_builtin()

__all__ = ["EngineConfig", "NodeKind", "NodeResult", "StepCall", "get_kind", "known_kinds", "register"]
