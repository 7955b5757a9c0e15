"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

It answers `POST /v1/chat/completions` (and `/chat/completions`) after a configurable delay, with
configurable status codes, per model if wanted, and records every request: what was asked, when,
how it was answered, and how many requests were in flight at once (`max_in_flight`).

In a test, in a background thread of the test process:

    with LLMTestServer(delay=(1.0, 2.0)) as server:
        env = {"STEADYFLOW_LLM_BASE_URL": server.url}
        ...
        assert server.max_in_flight >= 200

    server.configure(status=500)                      # every request fails
    server.configure(model="flaky", script=[500, 429])  # next two for that model fail, then 200

As its own process (benchmarks, or to keep the server off the test process's GIL):

    python -m tests.support.llm_server --port 8999 --delay 2.0
    LLMServerProcess(delay=2.0).start()   # the same, spawned; .url, .stats(), .configure(), .stop()

Control endpoints (both modes): `GET /_stats`, `GET /_requests`, `POST /_config` (JSON with the
keyword arguments of `configure`), `POST /_reset`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
Delay = float | tuple[float, float]


@dataclass
class Behaviour:
    """How the server answers requests (for one model, or by default)."""

    delay: Delay = 0.0  # seconds, or (low, high) for a uniform random delay per request
    status: int = 200  # the status of every request once `script` is used up
    script: list[int] = field(default_factory=list)  # statuses of the next requests, in order
    reply: str = "ok"  # the assistant message's content
    # Errors repeat the Authorization header they were sent, as some providers do ("Incorrect API key
    # provided: sk-..."): the credentials canary test checks that nothing stores it.
    echo_key: bool = False
    # OpenAI-shaped tool calls to answer with while the request's last message is not a `tool`
    # message (an agent's first round); once results come back, `reply` answers.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # A request with `"stream": true` is answered with server-sent events (the chat-completion chunk
    # format): the reply in pieces of `stream_chunk_chars`, `stream_delay` seconds apart.
    stream_chunk_chars: int = 4
    stream_delay: float = 0.0

    def next_status(self) -> int:
        return self.script.pop(0) if self.script else self.status

    def pick_delay(self, rng: random.Random) -> float:
        if isinstance(self.delay, tuple | list):
            low, high = self.delay
            return rng.uniform(float(low), float(high))
        return float(self.delay)


def _behaviour_fields(values: dict[str, Any]) -> dict[str, Any]:
    allowed = {"delay", "status", "script", "reply", "echo_key", "tool_calls", "stream_chunk_chars", "stream_delay"}
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"unknown behaviour field(s): {sorted(unknown)}; expected {sorted(allowed)}")
    out = dict(values)
    if isinstance(out.get("delay"), list):
        out["delay"] = tuple(out["delay"])
    if "script" in out:
        out["script"] = [int(s) for s in out["script"]]
    return out


class LLMTestServer:
    """The server. `start()` runs it in a background thread; `serve()` runs it on the current loop."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, delay: Delay = 0.0, status: int = 200,
                 script: list[int] | None = None, reply: str = "ok", seed: int | None = None) -> None:
        self.host = host
        self.port = port
        self._default = Behaviour(delay=delay, status=status, script=list(script or []), reply=reply)
        self._models: dict[str, Behaviour] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # --- Configuration and records (thread-safe) ---------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give a client (STEADYFLOW_LLM_BASE_URL)."""
        return f"http://{self.host}:{self.port}/v1"

    def configure(self, model: str | None = None, **values: Any) -> None:
        """Change how requests (for `model`, or by default) are answered from now on."""
        fields = _behaviour_fields(values)
        with self._lock:
            if model is None:
                for name, value in fields.items():
                    setattr(self._default, name, value)
            else:
                # A model's own behaviour starts from the default's delay, status and reply (not
                # from what is left of its script: scripts are per behaviour).
                default = self._default
                current = self._models.get(model) or Behaviour(delay=default.delay, status=default.status,
                                                               reply=default.reply, echo_key=default.echo_key)
                for name, value in fields.items():
                    setattr(current, name, value)
                self._models[model] = current

    def reset(self) -> None:
        """Forget recorded requests and the in-flight maximum (behaviour is kept)."""
        with self._lock:
            self._requests.clear()
            self._max_in_flight = self._in_flight

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._requests]

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def stats(self) -> dict[str, Any]:
        with self._lock:
            statuses: dict[str, int] = {}
            for r in self._requests:
                if r["status"] is not None:
                    statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
            return {"requests": len(self._requests), "in_flight": self._in_flight,
                    "max_in_flight": self._max_in_flight, "statuses": statuses}

    def wait_for_in_flight(self, count: int, timeout: float = 30.0) -> int:
        """Block until at least `count` requests are in flight at once; returns the number seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.in_flight >= count:
                return self.in_flight
            time.sleep(0.01)
        raise AssertionError(f"never saw {count} requests in flight (max {self.max_in_flight}) "
                             f"in {timeout} s")

    # --- HTTP -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models_list)
        app.router.add_get("/_stats", self._http_stats)
        app.router.add_get("/_requests", self._http_requests)
        app.router.add_post("/_config", self._http_config)
        app.router.add_post("/_reset", self._http_reset)
        return app

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return _error(400, f"request body is not a JSON object: {exc}", "invalid_request_error")
        model = str(body.get("model") or "")
        with self._lock:
            behaviour = self._models.get(model, self._default)
            status = behaviour.next_status()
            delay = behaviour.pick_delay(self._rng)
            reply = behaviour.reply
            echo_key = behaviour.echo_key
            messages = body.get("messages") or []
            last_role = messages[-1].get("role") if messages and isinstance(messages[-1], dict) else None
            tool_calls = list(behaviour.tool_calls) if last_role != "tool" else []
            chunk_chars, stream_delay = behaviour.stream_chunk_chars, behaviour.stream_delay
            if "X-Test-Delay" in request.headers:
                delay = float(request.headers["X-Test-Delay"])
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            record: dict[str, Any] = {
                "seq": len(self._requests) + 1, "path": request.path, "model": model,
                "messages": body.get("messages"), "body": body,
                "authorization": request.headers.get("Authorization"),
                "idempotency_key": request.headers.get("Idempotency-Key"),
                "traceparent": request.headers.get("traceparent"),
                "started_at": time.time(), "finished_at": None, "status": None, "delay": delay,
                "in_flight_at_start": self._in_flight,
            }
            self._requests.append(record)
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        finally:
            with self._lock:
                self._in_flight -= 1
                record["finished_at"] = time.time()
                record["status"] = status
        if status != 200:
            kind = ("rate_limit_error" if status == 429 else "server_error" if status >= 500
                    else "invalid_request")
            message = f"test server answered {status} as configured"
            if echo_key:
                message += f"; Incorrect API key provided: {request.headers.get('Authorization', '')}"
            return _error(status, message, kind)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or []
                            if isinstance(m, dict))
        completion_tokens = len(reply.split())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if body.get("stream") is True:
            return await self._stream(request, record, model, reply, usage, chunk_chars, stream_delay)
        return web.json_response({
            "id": f"chatcmpl-test-{record['seq']}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None if tool_calls else reply,
                                                 **({"tool_calls": tool_calls} if tool_calls else {})},
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    async def _stream(self, request: web.Request, record: dict[str, Any], model: str, reply: str,
                      usage: dict[str, int], chunk_chars: int, delay: float) -> web.StreamResponse:
        """The reply as server-sent events: a role chunk, content chunks, a usage chunk, [DONE]."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def event(payload: Any) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {data}\n\n".encode())

        base = {"id": f"chatcmpl-test-{record['seq']}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model or "test-model"}
        await event({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        size = max(int(chunk_chars), 1)
        with self._lock:
            record["chunks"] = 0
        try:
            for start in range(0, len(reply), size):
                if delay > 0:
                    await asyncio.sleep(delay)
                await event({**base, "choices": [{"index": 0, "delta": {"content": reply[start:start + size]},
                                                  "finish_reason": None}]})
                with self._lock:
                    record["chunks"] += 1
            await event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            await event({**base, "choices": [], "usage": usage})
            await event("[DONE]")
            await response.write_eof()
        except ConnectionError:
            pass  # the client gave up (its body cap, its deadline): what the tests of those expect
        return response

    async def _models_list(self, request: web.Request) -> web.Response:
        with self._lock:
            names = sorted(self._models) or ["test-model"]
        return web.json_response({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    async def _http_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _http_requests(self, request: web.Request) -> web.Response:
        return web.json_response(self.requests)

    async def _http_config(self, request: web.Request) -> web.Response:
        try:
            values = await request.json()
            model = values.pop("model", None)
            self.configure(model, **values)
        except (ValueError, TypeError, AttributeError) as exc:
            return _error(400, str(exc), "invalid_request_error")
        return web.json_response({"ok": True})

    async def _http_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    # --- Running ----------------------------------------------------------------------------

    async def serve(self) -> None:
        """Start listening on the running loop (port 0 picks a free port, then `self.port` is set)."""
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        # Our own socket, to learn the port chosen for port 0; a deep backlog, because hundreds of
        # clients connect at the same instant.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock, backlog=2048)
        await site.start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> LLMTestServer:
        """Serve in a background thread (its own event loop); returns once listening."""
        self._thread = threading.Thread(target=self._thread_main, name="llm-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("LLM test server did not start within 10 s")
        if self._error is not None:
            raise RuntimeError(f"LLM test server failed to start: {self._error}") from self._error
        return self

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self.serve())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.close())
            # Requests still sleeping (their clients gave up): cancel them, as asyncio.run would.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> LLMTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


# --- As a process ---------------------------------------------------------------------------------

class LLMServerProcess:
    """`python -m tests.support.llm_server` as a child process, with the same control surface."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, delay: Delay = 0.0, status: int = 200,
                 script: list[int] | None = None, reply: str = "ok") -> None:
        self.args = [sys.executable, "-m", "tests.support.llm_server", "--host", host, "--port", str(port),
                     "--status", str(status), "--reply", reply]
        if isinstance(delay, tuple | list):
            self.args += ["--delay", str(delay[0]), "--delay-max", str(delay[1])]
        else:
            self.args += ["--delay", str(delay)]
        if script:
            self.args += ["--script", ",".join(str(s) for s in script)]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> LLMServerProcess:
        self.proc = subprocess.Popen(self.args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"LLM test server process did not start: {line!r}")
        self.url = line.removeprefix("listening on ")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _call(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        root = self.url.removesuffix("/v1")
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(root + path, data=data, method="POST" if data is not None else "GET",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - our own local server
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        return self._call("/_stats")

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._call("/_requests")

    @property
    def max_in_flight(self) -> int:
        return int(self.stats()["max_in_flight"])

    @property
    def in_flight(self) -> int:
        return int(self.stats()["in_flight"])

    def wait_for_in_flight(self, count: int, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (seen := self.in_flight) >= count:
                return seen
            time.sleep(0.02)
        raise AssertionError(f"never saw {count} requests in flight (max {self.max_in_flight}) "
                             f"in {timeout} s")

    def configure(self, model: str | None = None, **values: Any) -> None:
        self._call("/_config", {**values, **({"model": model} if model else {})})

    def reset(self) -> None:
        self._call("/_reset", {})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LLMServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _serve_until_signalled(server: LLMTestServer) -> None:
    await server.serve()
    print(f"listening on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OpenAI-compatible chat-completions test server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed at start)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--delay-max", type=float, default=None, help="random delay in [delay, delay-max]")
    parser.add_argument("--status", type=int, default=200, help="status of every answer")
    parser.add_argument("--script", default="", help="statuses of the first answers, comma-separated")
    parser.add_argument("--reply", default="ok", help="the assistant message's content")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    delay: Delay = (args.delay, args.delay_max) if args.delay_max is not None else args.delay
    script = [int(s) for s in args.script.split(",") if s.strip()]
    server = LLMTestServer(host=args.host, port=args.port, delay=delay, status=args.status, script=script,
                           reply=args.reply, seed=args.seed)
    asyncio.run(_serve_until_signalled(server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
