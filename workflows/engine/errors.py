"""Typed errors. `permanent` tells retries and circuit breakers whether trying again can help."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class StepError(Exception):
    """A node failed. Transient by default: the step is retried while attempts remain."""

    permanent = False
    code = "step_error"

    def __init__(self, message: str, *, permanent: bool | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        if permanent is not None:
            self.permanent = permanent
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "permanent": self.permanent, **self.details}


class PermanentStepError(StepError):
    permanent = True
    code = "permanent_error"


class StepTimeout(StepError):
    code = "timeout"


class ConfigError(StepError):
    """The node's configuration cannot work (bad template, unknown function): retrying won't help."""

    permanent = True
    code = "config_error"


class ExpressionError(Exception):
    """A `when` condition or a `{{ template }}` that does not parse or cannot be evaluated."""


class OutboundBlocked(StepError):
    """The SSRF guard refused an outbound request."""

    permanent = True
    code = "outbound_blocked"


class PayloadTooLarge(StepError):
    permanent = True
    code = "payload_too_large"


class CircuitOpen(StepError):
    """The provider's circuit breaker is open and the node has no rule fallback: halt into review."""

    permanent = True
    code = "circuit_open"


class ProviderError(StepError):
    """An LLM provider failed; a transient one (5xx, 429, unreachable) counts against its circuit breaker."""

    code = "provider_error"


@dataclass(frozen=True)
class GraphIssue:
    """One problem with a graph, naming where it is: a node id, an edge, or the graph itself."""

    message: str
    node: str | None = None
    edge: int | None = None  # index in the graph's edge list
    field: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.node is not None:
            out["node"] = self.node
        if self.edge is not None:
            out["edge"] = self.edge
        if self.field is not None:
            out["field"] = self.field
        return out

    def __str__(self) -> str:
        return self.message


@dataclass
class GraphInvalid(Exception):
    issues: list[GraphIssue] = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(str(issue) for issue in self.issues)
