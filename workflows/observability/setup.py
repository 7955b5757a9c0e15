"""Switches on what every process observes (called from the app's ready()): the metrics commit
observer always (an increment in memory per step), spans only when OTEL_EXPORTER_OTLP_ENDPOINT is set
(OpenTelemetry is not even imported otherwise). Logs are configured by settings.LOGGING."""

from __future__ import annotations

import os

from workflows.runtime import observe


def install() -> None:
    from workflows.observability import metrics, tracing

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # made by the settings
        import atexit

        atexit.register(metrics.mark_process_dead)

    observe.add_observer(metrics.observe_commit)
    if tracing.enabled_by_environment():
        tracing.setup()
