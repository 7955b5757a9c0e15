"""Node kinds, registered by name (registry.py). One module per kind, loaded here."""

from __future__ import annotations

from workflows.engine.nodes.base import EngineConfig, NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import get_kind, known_kinds, register, unmeasured_kinds


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

__all__ = ["EngineConfig", "NodeKind", "NodeResult", "StepCall", "get_kind", "known_kinds", "register",
           "unmeasured_kinds"]
