"""System checks: configuration mistakes reported by `manage.py check` and at start-up.

Tagged ENGINE: the long-running processes (`run_worker`, `run_scheduler`) and the frequent `health` probe run
only these at start (PROCESS_CHECKS), not Django's whole registry, which imports every URL, view and API schema
(~0.4 s of CPU per start) for pages those processes never serve. `manage.py check`, `migrate` and the
other commands still run everything."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

ENGINE = "steadyflow"
# BaseCommand.requires_system_checks for the processes named above: only the checks tagged ENGINE.
PROCESS_CHECKS = [ENGINE]


@checks.register(ENGINE)
def check_engine_settings(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    engine = settings.STEADYFLOW
    if engine["LEASE_S"] < engine["SCHEDULER_INTERVAL_S"] * 2:
        messages.append(checks.Warning(
            "STEADYFLOW_LEASE_S is shorter than two scheduler intervals: live steps may be reclaimed",
            id="steadyflow.W001"))
    base = engine["LLM_BASE_URL"]
    if not base.startswith(("http://", "https://")):
        messages.append(checks.Error(f"STEADYFLOW_LLM_BASE_URL={base!r} must be an http(s) URL",
                                     id="steadyflow.E001"))
    if engine["LLM_DEFAULT_PROVIDER"] not in ("openai", "scripted"):
        messages.append(checks.Error(f"STEADYFLOW_LLM_DEFAULT_PROVIDER={engine['LLM_DEFAULT_PROVIDER']!r} must be "
                                     "openai or scripted", id="steadyflow.E002"))
    return messages
