from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

from workflows.engine import limits
from workflows.engine.errors import ConfigError
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register


@register
class Wait(NodeKind):
    """A timer: completes `seconds` after it was activated, or at `until` (ISO 8601)."""

    name = "wait"
    label = "Timer"
    retries = False  # a timer waits; nothing runs that could fail and be retried
    measured = False  # its started -> finished is the time it waited
    icon = "◷"
    color = "#ca8a04"
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "seconds": limits.number(0, limits.MAX_WAIT_S, title="Seconds to wait"),
            "until": {"type": "string", "title": "Or until (ISO 8601 time, templates allowed)"},
        },
        "oneOf": [{"required": ["seconds"]}, {"required": ["until"]}],
    }

    def run(self, call: StepCall) -> NodeResult:
        if "until" in call.config:
            try:
                due = datetime.fromisoformat(str(call.config["until"]))
            except ValueError:
                raise ConfigError(f"until={call.config['until']!r} is not an ISO 8601 time") from None
            if due.tzinfo is None:
                raise ConfigError("until must include a time zone offset")
        else:
            due = call.activated_at + timedelta(seconds=float(call.config["seconds"]))
        if call.now < due:
            return NodeResult(defer_until=due)
        return NodeResult(output={"waited_until": due.isoformat()})
