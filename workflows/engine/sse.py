"""Server-sent events read as bytes arrive: each complete line starting with `data:` is handed to
`on_data` (comments, `event:` names and blank separators are skipped). The providers' streams
(engine/llm_stream.py, engine/native_providers.py) read their answers with it."""

from __future__ import annotations


class SseFeed:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._line(line.rstrip(b"\r"))

    def close(self) -> None:
        if self._buffer.strip():
            self._line(self._buffer.strip())
        self._buffer = b""

    def _line(self, line: bytes) -> None:
        if line.startswith(b"data:"):
            self.on_data(line[5:].strip())

    def on_data(self, payload: bytes) -> None:
        raise NotImplementedError
