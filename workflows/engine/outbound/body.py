"""Reading a response body under a byte cap applied to the bytes received and to the decoded bytes,
so neither a huge body nor a small compressed one that inflates (a gzip bomb) is ever held whole."""

from __future__ import annotations

import zlib

from workflows.engine.outbound.types import ResponseTooLarge, UndecodableBody


class _Inflate:
    """One gzip or deflate layer, producing at most `limit` bytes in all."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._limit = limit
        self._produced = 0
        self._deflate = encoding == "deflate"
        # gzip: 16 + MAX_WBITS; deflate: the zlib wrapper first (RFC 9110), raw deflate if that fails.
        self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS if not self._deflate else zlib.MAX_WBITS)
        self._started = False

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._inflate(data)
        except zlib.error:
            if not (self._deflate and not self._started):
                raise
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._inflate(data)
        self._started = True
        return out

    def _inflate(self, data: bytes) -> bytes:
        # max_length stops inflating one byte past the cap: the rest stays compressed (unconsumed_tail).
        out = self._obj.decompress(data, self._limit - self._produced + 1)
        self._produced += len(out)
        if self._produced > self._limit:
            raise ResponseTooLarge(f"larger than {self._limit} bytes once decompressed")
        return out

    def flush(self) -> bytes:
        out = self._obj.flush(self._limit - self._produced + 1)
        self._produced += len(out)
        if self._produced > self._limit:
            raise ResponseTooLarge(f"larger than {self._limit} bytes once decompressed")
        return out


class BodyReader:
    """Feed it the body as it arrives (still content-encoded); `result()` is the decoded body."""

    def __init__(self, content_encoding: str | None, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.received = 0  # bytes as they came off the wire (after chunked framing, before decoding)
        # Content-Encoding lists codings in the order they were applied: undo them from the last.
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        self._layers: list[_Inflate] = []
        for coding in reversed(codings):
            if coding in ("gzip", "x-gzip", "deflate"):
                self._layers.append(_Inflate("deflate" if coding == "deflate" else "gzip", max_bytes))
            elif coding != "identity":
                raise UndecodableBody(f"has an unsupported Content-Encoding {coding!r} (gzip and deflate only)")
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> bytes:
        """Take the next chunk; returns the bytes it decoded to (a streaming reader passes them on)."""
        self.received += len(chunk)
        if self.received > self.max_bytes:
            raise ResponseTooLarge(f"larger than {self.max_bytes} bytes")
        data = self._decode(chunk, flush=False)
        self._keep(data)
        return data

    def result(self) -> bytes:
        self._keep(self._decode(b"", flush=True))
        return b"".join(self._parts)

    def _decode(self, data: bytes, *, flush: bool) -> bytes:
        try:
            for layer in self._layers:
                data = layer.feed(data) if not flush else layer.feed(data) + layer.flush()
        except ResponseTooLarge:
            raise
        except zlib.error as exc:
            raise UndecodableBody(f"has a corrupt compressed body: {exc}") from None
        return data

    def _keep(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self.max_bytes:
            raise ResponseTooLarge(f"larger than {self.max_bytes} bytes once decompressed")
        if data:
            self._parts.append(data)
