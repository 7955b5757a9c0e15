"""A TCP proxy in front of PostgreSQL that can lose a COMMIT's acknowledgement.

This is the failure "the commit succeeded but the caller was told it failed": the server commits
and answers `CommandComplete COMMIT`, and the network drops the connection before the answer
reaches the client, which sees "server closed the connection unexpectedly". Nothing in the
product is patched; the proxy only forwards bytes and, once armed, closes one connection at the
right moment.

A worker connection arms itself by sending the query `SELECT 'steadyflow-fault:drop-next-commit-ack'`
(see functions.arm_commit_drop): the next commit on that same connection is forwarded to the
server, its acknowledgement is swallowed, and both sockets are closed. A commit is a COMMIT, or a step's
commit written as one statement in autocommit (statements.pg_commit_unit, a prepared statement: the
proxy learns its name from the Parse message and sees each execution as a Bind of that name), which
has committed once the server says it is ready for the next query, outside a transaction.

The client must connect with sslmode=disable (and gssencmode=disable) so the protocol is visible.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from workflows.store import statements

ARM_MARKER = b"steadyflow-fault:drop-next-commit-ack"
_COMMIT_QUERY = b"COMMIT\x00"


def _is_commit_parse(body: bytes) -> bool:
    """A Parse message (statement name, query, parameter types) whose query is COMMIT."""
    parts = body.split(b"\x00", 2)
    return len(parts) > 1 and parts[1] == b"COMMIT"


_COMMIT_COMPLETE = b"C\x00\x00\x00\x0bCOMMIT\x00"  # CommandComplete, length 11, tag "COMMIT"
_IDLE = b"Z\x00\x00\x00\x05I"  # ReadyForQuery, outside a transaction: an autocommit statement committed
# How every one-statement commit begins (its instance's UPDATE).
_ONE_STATEMENT_COMMIT = statements.pg_commit_unit((), ()).split(" SET ", 1)[0].encode()
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    armed: bool = False
    swallowing: bool = False
    swallow_until: bytes = _COMMIT_COMPLETE
    commit_statements: set[bytes] = field(default_factory=set)  # prepared one-statement commits
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class CommitAckDropper:
    def __init__(self, upstream_host: str, upstream_port: int, blackout_s: float = 0.0) -> None:
        """`blackout_s`: after dropping an acknowledgement, refuse new connections this long (the
        database stays unreachable, so the client's own retries give up)."""
        self.upstream = (upstream_host, upstream_port)
        self.blackout_s = blackout_s
        self._refuse_until = 0.0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.dropped_acks = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._stopping = False
        threading.Thread(target=self._accept, daemon=True, name="pgproxy-accept").start()

    def stop(self) -> None:
        self._stopping = True
        self.listener.close()
        for link in list(self._links):
            link.close()

    def _accept(self) -> None:
        while not self._stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self._refuse_until:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
                self.connections += 1
            threading.Thread(target=self._client_to_server, args=(link,), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(link,), daemon=True).start()

    @staticmethod
    def _read_exact(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("peer closed")
            data += chunk
        return data

    def _client_to_server(self, link: _Link) -> None:
        """Parse the client's messages (to see the arm marker and COMMIT), forwarding each whole."""
        try:
            # Untyped start-up messages: SSL/GSS requests (answered 'N' by the server) then the startup.
            while True:
                header = self._read_exact(link.client, 8)
                length, code = struct.unpack("!ii", header)
                rest = self._read_exact(link.client, length - 8)
                link.server.sendall(header + rest)
                if code not in (_SSL_REQUEST, _GSSENC_REQUEST):
                    break
            while True:
                header = self._read_exact(link.client, 5)
                kind = header[:1]
                (length,) = struct.unpack("!i", header[1:])
                body = self._read_exact(link.client, length - 4)
                if kind == b"P" and _ONE_STATEMENT_COMMIT in body:
                    link.commit_statements.add(body.split(b"\x00", 1)[0])
                if kind in (b"Q", b"P") and ARM_MARKER in body:
                    link.armed = True
                elif link.armed and (kind == b"Q" and body == _COMMIT_QUERY or kind == b"P" and _is_commit_parse(body)):
                    # A COMMIT sent as a simple query, or in the extended protocol (a pipeline).
                    link.armed = False
                    link.swallow_until = _COMMIT_COMPLETE
                    link.swallowing = True
                elif link.armed and kind == b"B" and body.split(b"\x00", 2)[1] in link.commit_statements:
                    # A one-statement commit executed: committed once the server is idle again.
                    link.armed = False
                    link.swallow_until = _IDLE
                    link.swallowing = True
                link.server.sendall(header + body)
        except (OSError, ConnectionError):
            pass
        finally:
            link.close()

    def _server_to_client(self, link: _Link) -> None:
        buffered = b""
        try:
            while True:
                chunk = link.server.recv(65536)
                if not chunk:
                    return
                if link.swallowing:
                    # The server is answering the armed commit: once it says it is complete the
                    # transaction is durable; the client never hears it.
                    buffered += chunk
                    if link.swallow_until in buffered:
                        with self._lock:
                            self.dropped_acks += 1
                            self._refuse_until = time.monotonic() + self.blackout_s
                        return
                    continue
                link.client.sendall(chunk)
        except OSError:
            pass
        finally:
            link.close()
