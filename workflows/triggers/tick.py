"""The scheduler loop's trigger work (manage.py run_scheduler): fire due schedules, send due notices."""

from __future__ import annotations

from datetime import datetime

from workflows.triggers import notifications, schedules


def tick(now: datetime) -> dict[str, int]:
    report = {}
    fired = schedules.tick(now)
    if fired:
        report["schedules_fired"] = fired
    if notifications.kick_due(now):
        report["notifications_kicked"] = 1
    return report
