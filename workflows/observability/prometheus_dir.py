"""prometheus_client's multiprocess mode, set up from the settings (before any app creates a metric).

Every process writes its values into PROMETHEUS_MULTIPROC_DIR, in files named after the process;
the web's /metrics adds them up. Files are named host-pid, not just pid (prometheus_client's
default), so containers sharing one volume (each its own pid 1) never write into each other's files.
Imports nothing of Django.
"""

from __future__ import annotations

import os
import socket


def process_identifier() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def setup(directory: str, *, record: bool = True) -> None:
    """Write this process's values to `directory`; with `record=False` keep them in memory instead
    (short-lived management commands: a file each, every health check, would pile up and slow every
    scrape; /metrics in any process still reads the directory)."""
    from prometheus_client import values

    os.makedirs(directory, exist_ok=True)
    if record:
        values.ValueClass = values.MultiProcessValue(process_identifier=process_identifier)
    else:
        values.ValueClass = values.MutexValue


def mark_process_dead(directory: str) -> None:
    """At a process's exit: drop its live gauges (e.g. LLM calls in flight), as prometheus_client's
    own mark_process_dead does for pid-named files. Its counters stay: they still add up."""
    for mode in ("livesum", "liveall", "livemax", "livemin", "livemostrecent"):
        try:
            os.remove(os.path.join(directory, f"gauge_{mode}_{process_identifier()}.db"))
        except FileNotFoundError:
            pass
