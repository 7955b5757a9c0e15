"""Local fakes of Anthropic's Messages API and Google's Gemini API, for tests (never the internet).

They answer with the shapes the real APIs document (recorded from their references): Anthropic
`POST /v1/messages` (a message with text and tool_use blocks, usage with cache tokens; or, with
`stream: true`, its server-sent events), Gemini `POST /v1beta/models/<model>:generateContent` (and
`:streamGenerateContent?alt=sse`). Each request is recorded (path, headers, body); the replies are
given in order as plain dicts: {"text": ..., "tool_calls": [{"id", "name", "args"}], "usage": {...}}.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class NativeLLMServer:
    def __init__(self, replies: list[dict[str, Any]], status: int = 200) -> None:
        self.replies = list(replies)
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self._calls = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if fake.status != 200:
                    self.answer(fake.status, {"error": {"type": "overloaded_error", "message": "busy"}})
                    return
                reply = fake.replies[min(fake._calls, len(fake.replies) - 1)]
                fake._calls += 1
                if self.path.endswith("/messages"):
                    if body.get("stream"):
                        self.stream(anthropic_events(reply, body["model"]))
                    else:
                        self.answer(200, anthropic_message(reply, body["model"]))
                elif ":streamGenerateContent" in self.path:
                    self.stream(gemini_events(reply))
                elif self.path.endswith(":generateContent"):
                    self.answer(200, gemini_response(reply))
                else:
                    self.answer(404, {"error": "no such endpoint"})

            def answer(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def stream(self, events: list[dict[str, Any]]) -> None:
                raw = b"".join(f"event: {e.get('type', 'message')}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> NativeLLMServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def anthropic_message(reply: dict[str, Any], model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply["text"]}] if reply.get("text") else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                for c in reply.get("tool_calls") or []]
    usage = reply.get("usage") or {}
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if reply.get("tool_calls") else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": usage.get("input", 0), "output_tokens": usage.get("output", 0),
                      "cache_read_input_tokens": usage.get("cache_read", 0),
                      "cache_creation_input_tokens": usage.get("cache_write", 0)}}


def anthropic_events(reply: dict[str, Any], model: str) -> list[dict[str, Any]]:
    message = anthropic_message(reply, model)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **message, "content": [], "usage": {**message["usage"], "output_tokens": 1}}}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            text = block["text"]
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": text[i:i + 3]}} for i in range(0, len(text), 3)]
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            raw = json.dumps(block["input"])
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": raw[i:i + 5]}}
                       for i in range(0, len(raw), 5)]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]},
                   "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


def gemini_response(reply: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": reply["text"]}] if reply.get("text") else []
    parts += [{"functionCall": {"name": c["name"], "args": c["args"]}} for c in reply.get("tool_calls") or []]
    usage = reply.get("usage") or {}
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage.get("input", 0), "candidatesTokenCount": usage.get("output", 0),
                              "cachedContentTokenCount": usage.get("cache_read", 0),
                              "totalTokenCount": usage.get("input", 0) + usage.get("output", 0)},
            "modelVersion": "gemini-test-001"}


def gemini_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    whole = gemini_response(reply)
    text = reply.get("text") or ""
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    events = [{"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}],
               "modelVersion": "gemini-test-001"} for p in pieces]
    calls = [p for p in whole["candidates"][0]["content"]["parts"] if "functionCall" in p]
    if calls:
        events.append({"candidates": [{"content": {"role": "model", "parts": calls}, "index": 0}]})
    events.append({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}],
                   "usageMetadata": whole["usageMetadata"], "modelVersion": "gemini-test-001"})
    return events
