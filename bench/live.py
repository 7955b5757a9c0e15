"""The `live` workload: how long a committed event takes to reach the instance page's screen.

A real browser (Debian's chromium, through Playwright) watches the instance page served by daphne
while this process commits the instance's transitions one at a time, paced, through the runtime's
own functions (claim_step, run_claimed, finish_step: the code a worker runs). Right after each commit
it notes the time; the page notes when it painted each event (the frame after it was drawn,
`steadyflowLive.paints`). The lag of an event is paint time minus commit time, both read from the same
machine's clock; p50/p95 are over LIVE_EVENTS events.

Its steps sit on the `io` queue, which the benchmark cluster runs no worker for, so every commit is
this process's and its time is known exactly. Called by `python -m bench` (bench/__main__.py) with
Django set up on the throwaway database and Redis; `run()` returns the JSON line.
"""

from __future__ import annotations

import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIVE_EVENTS = 200
# Each node commits twice (claim: step_started; finish: step_succeeded, edges_taken, step_queued).
NODES = LIVE_EVENTS // 4 + 2
PACE_S = 0.03  # between commits: the lag of single updates, not of a burst
CHROMIUM = Path(os.environ.get("STEADYFLOW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def _note(message: str) -> None:
    print(f"[bench] live: {message}", file=sys.stderr, flush=True)


def _graph() -> dict[str, Any]:
    ids = ["start", *(f"n{i}" for i in range(1, NODES + 1)), "end"]
    nodes = [{"id": "start", "type": "start"},
             *({"id": n, "type": "python", "queue": "io", "config": {"function": "noop"}} for n in ids[1:-1]),
             {"id": "end", "type": "end"}]
    return {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
            "settings": {"max_transitions": NODES * 2 + 10, "ttl_s": 3600}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_daphne(port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DEBUG": "1", "PYTHONUNBUFFERED": "1"}  # DEBUG: daphne serves the static files
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "dashboard.asgi:application"], cwd=ROOT, env=env, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daphne exited at start: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("daphne did not answer within 30 s")


def _io_workers() -> int:
    import django_rq
    from rq import Worker

    return sum(1 for w in Worker.all(connection=django_rq.get_connection("io")) if "io" in w.queue_names())


def _commit_steps(instance_id: int, committed: dict[int, float]) -> None:
    """Run the instance's queued steps here, one commit at a time, noting each commit's events."""
    from workflows import runtime
    from workflows.engine.statuses import StepStatus
    from workflows.models import StepRun, WorkflowInstance

    def seq() -> int:
        return int(WorkflowInstance.objects.filter(pk=instance_id).values_list("event_seq", flat=True)[0])

    def note_commit(before: int, at: float) -> int:
        after = seq()
        for s in range(before + 1, after + 1):
            committed[s] = at
        return after

    last = seq()
    while True:
        step = StepRun.objects.filter(instance_id=instance_id, status=StepStatus.QUEUED).order_by("id").first()
        if step is None:
            return
        time.sleep(PACE_S)
        claim = runtime.claim_step(step.pk, "bench-live")
        last = note_commit(last, time.time() * 1000)
        if claim is None:
            raise RuntimeError(f"step {step.pk} was claimed by someone else: stop the io workers")
        outcome = runtime.run_claimed(claim)
        time.sleep(PACE_S)
        runtime.finish_step(claim, outcome, allow_inline=False)
        last = note_commit(last, time.time() * 1000)


def run() -> dict[str, Any]:
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from workflows import runtime
    from workflows.authoring.definitions import save_version

    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    if _io_workers():
        raise RuntimeError("an `io` worker is running: the live workload commits its io steps itself")

    password = secrets.token_urlsafe(12)
    username = f"bench-live-{secrets.token_hex(3)}"
    get_user_model().objects.create_superuser(username, f"{username}@example.com", password)
    version = save_version(f"bench-live-{secrets.token_hex(3)}", _graph())
    instance = runtime.start_instance(version, {})

    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-live-daphne-{os.getpid()}.log"
    port = _free_port()
    daphne = _start_daphne(port, log)
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    # Playwright's sync API keeps an event loop in this thread; the ORM calls here run between its
    # calls, never during them (docs/STACK_NOTES.md).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    committed: dict[int, float] = {}
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(base_url=f"http://127.0.0.1:{port}", viewport={"width": 1440, "height": 900})
            page.goto("/accounts/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            page.wait_for_url(lambda url: "/accounts/login/" not in url)
            instance.refresh_from_db()
            page.goto(f"/instances/{instance.pk}/")
            # Functions, not expression strings: the page's CSP forbids evaluating strings.
            page.wait_for_function("seq => window.steadyflowLive && document.getElementById('conn').dataset.state"
                                   " === 'live' && steadyflowLive.store.lastSeq >= seq", arg=instance.event_seq,
                                   timeout=30_000)
            _note(f"watching instance {instance.pk} ({NODES} steps) at http://127.0.0.1:{port}")
            _commit_steps(instance.pk, committed)
            last = max(committed)
            page.wait_for_function("seq => steadyflowLive.paints.has(seq)", arg=last, timeout=30_000)
            paints = {int(k): float(v) for k, v in page.evaluate("() => Array.from(steadyflowLive.paints.entries())")}
            received = {int(k): float(v)
                        for k, v in page.evaluate("() => Array.from(steadyflowLive.received.entries())")}
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
        daphne.terminate()
        try:
            daphne.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daphne.kill()
        log.unlink(missing_ok=True)

    seqs = sorted(committed)[:LIVE_EVENTS]
    missing = [s for s in seqs if s not in paints]
    if missing:
        raise RuntimeError(f"{len(missing)} event(s) never painted: {missing[:10]}")
    lags = [paints[s] - committed[s] for s in seqs]
    # Where the time goes: commit -> the socket message in the page, then message -> repaint.
    wire = [received[s] - committed[s] for s in seqs if s in received]
    page_ms = [paints[s] - received[s] for s in seqs if s in received]
    return {"workload": "live", "p50_ms": _pct(lags, 50), "p95_ms": _pct(lags, 95), "max_ms": round(max(lags), 1),
            "events": len(lags), "to_socket_p50_ms": _pct(wire, 50), "to_socket_p95_ms": _pct(wire, 95),
            "to_paint_p50_ms": _pct(page_ms, 50), "to_paint_p95_ms": _pct(page_ms, 95),
            "by_socket": len(wire), "db": connection.vendor, "pace_ms": PACE_S * 1000,
            "load_avg": round(os.getloadavg()[0], 2)}


def _pct(values: list[float], p: int) -> float | None:
    if len(values) < 2:
        return round(values[0], 1) if values else None
    return round(statistics.quantiles(sorted(values), n=100, method="inclusive")[p - 1], 1)


if __name__ == "__main__":
    # Standalone: `python -m bench.live` against the configured database and Redis (migrated).
    import json

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    print(json.dumps(run()))
