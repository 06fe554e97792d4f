"""A fault-injecting HTTP proxy on 127.0.0.1 in front of the real moto S3 server, for the
answers moto cannot give: a 500/503 storm with S3's error documents (`SlowDown`), a
wrong-region redirect, a truncated or non-XML body, a connection reset mid-body, a body
far past any bound, a request held with no answer, a listing whose continuation token
loops, an object whose `Last-Modified` does not parse.

Everything the proxy does not break goes to moto unchanged and comes back unchanged, so
the client talks to a real S3 API. The pattern is tests/github_standin/faults.py's: a
:class:`Fault` matches requests by method and a regular expression searched in the path
and query (`path`), fires `count` times (the first matching armed fault fires), and its
`action` is one of

``"status"``
    answer `status` with `body` (an S3 error document: :func:`error_document`) and
    `headers`, without asking moto.
``"rewrite"``
    ask moto (for `target(path)` where `target` is given), then answer with
    `rewrite(body)` in place of its body and `headers` set over its headers (a listing
    made to loop, a `Last-Modified` that does not parse).
``"reset"``
    ask moto, send its status and headers (its `Content-Length` whole) and `send_bytes` of
    its body, then reset the connection (RST): a body cut off mid-way; with `send_bytes`
    0, reset it before the status (the answer to a request moto carried out, lost whole).
``"truncate"``
    as ``"reset"``, but the connection is closed in order (FIN) after `send_bytes`: an
    answer shorter than its `Content-Length`, with no error on the socket.
``"huge"``
    answer `status` with a body of `size` bytes (made as it is sent; a client that stops
    reading costs the proxy nothing) and `headers`.
``"hold"``
    read the request and answer nothing until :meth:`FaultProxy.release` (or 300 s), then
    close the connection; with `send_bytes`, ask moto first and send its status, headers
    and that much of its body before holding (a body that stalls mid-way).
``"trickle"``
    ask moto, send its status and headers, then its body a byte every `TRICKLE_S`
    seconds, each well within any read timeout (a body that never stalls and never ends
    in time).

`FaultProxy.requests` is every request the proxy saw (method, path with its query, and
the fault that fired, if any).
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from xml.sax.saxutils import escape

import pytest

from tests.s3_server import S3Server

Action = Literal["status", "rewrite", "reset", "truncate", "huge", "hold", "trickle"]
HOLD_LIMIT = 300.0  # seconds a held request waits at most
TRICKLE_S = 0.05
CHUNK = 64 * 1024
# headers that belong to one connection, not to the request or answer
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
     "upgrade", "expect"}
)  # fmt: skip


def error_document(code: str, message: str, **more: str) -> bytes:
    """S3's XML error document."""
    extra = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in more.items())
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{escape(code)}</Code>'
        f"<Message>{escape(message)}</Message>{extra}<RequestId>FAULT0001</RequestId></Error>"
    ).encode()


SLOW_DOWN = error_document("SlowDown", "Please reduce your request rate.")
INTERNAL_ERROR = error_document(
    "InternalError", "We encountered an internal error. Please try again."
)
ACCESS_DENIED = error_document("AccessDenied", "Access Denied")


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One injected failure; see the module docstring for the actions."""

    method: str = "*"
    path: str = ".*"  # searched in the path with its query string
    action: Action = "status"
    status: int = 503
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    count: int = 1
    rewrite: Callable[[bytes], bytes] | None = None
    target: Callable[[str], str] | None = None
    skip: int = 0  # matching requests let through before the fault fires
    send_bytes: int = 0
    size: int = 0

    def matches(self, method: str, target: str) -> bool:
        return self.method in ("*", method.upper()) and re.search(self.path, target) is not None


@dataclass(frozen=True)
class Seen:
    method: str
    target: str  # the path with its query string
    fault: Fault | None


class FaultProxy:
    """The proxy: `endpoint` is what the client is given; moto is at `upstream`."""

    def __init__(self, upstream: str) -> None:
        match = re.fullmatch(r"http://([^:/]+):(\d+)/?", upstream)
        if match is None:
            raise ValueError(f"{upstream}: not http://HOST:PORT")
        self.upstream = (match[1], int(match[2]))
        self._lock = threading.Lock()
        self._armed: list[tuple[Fault, list[int]]] = []
        self._seen: list[Seen] = []
        self._released = threading.Event()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # --- faults ---

    def add(self, fault: Fault) -> Fault:
        if fault.count < 1:
            raise ValueError("a fault fires at least once (count >= 1)")
        with self._lock:
            self._armed.append((fault, [fault.count, fault.skip]))
            self._released.clear()
        return fault

    def clear(self) -> None:
        """Disarm every fault and let every held request go."""
        with self._lock:
            self._armed.clear()
        self.release()

    def release(self) -> None:
        self._released.set()

    def take(self, method: str, target: str) -> Fault | None:
        with self._lock:
            fault = None
            for index, (armed, left) in enumerate(self._armed):
                if armed.matches(method, target):
                    if left[1] > 0:
                        left[1] -= 1
                        continue
                    left[0] -= 1
                    if left[0] == 0:
                        del self._armed[index]
                    fault = armed
                    break
            self._seen.append(Seen(method, target, fault))
            return fault

    def fired(self, fault: Fault) -> int:
        with self._lock:
            return sum(1 for seen in self._seen if seen.fault is fault)

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def wait_held(self) -> bool:
        return self._released.wait(HOLD_LIMIT)

    # --- moto ---

    def forward(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """moto's answer to the request: (status, reason, headers, body)."""
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.request(method, target, body=body or None, headers=dict(headers))
            answer = connection.getresponse()
            data = answer.read()
            kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP]
            return answer.status, answer.reason, kept, data
        finally:
            connection.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection the client dropped, or the proxy reset: as meant


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # so that `Expect: 100-continue` is answered at once

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        proxy = self.server.proxy
        self.close_connection = True  # one request a connection: nothing is left half-read
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        fault = proxy.take(self.command, self.path)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if fault is None:
            self._send(*proxy.forward(self.command, self.path, headers, body))
        elif fault.action == "status":
            self._send(fault.status, "Fault", list(fault.headers.items()), fault.body)
        elif fault.action == "rewrite":
            asked = fault.target(self.path) if fault.target is not None else self.path
            status, reason, kept, data = proxy.forward(self.command, asked, headers, body)
            if fault.rewrite is not None:
                data = fault.rewrite(data)
            replaced = {k.lower() for k in fault.headers}
            kept = [(k, v) for k, v in kept if k.lower() not in replaced]
            self._send(status, reason, [*kept, *fault.headers.items()], data)
        elif fault.action == "reset" and not fault.send_bytes:
            proxy.forward(self.command, self.path, headers, body)
            self._reset()
        elif fault.action in ("reset", "truncate"):
            status, reason, kept, data = proxy.forward(self.command, self.path, headers, body)
            self._head(status, reason, kept, len(data))
            with contextlib.suppress(OSError):
                self.wfile.write(data[: fault.send_bytes])
                self.wfile.flush()
            if fault.action == "reset":
                self._reset()
        elif fault.action == "trickle":
            status, reason, kept, data = proxy.forward(self.command, self.path, headers, body)
            self._head(status, reason, kept, len(data))
            with contextlib.suppress(OSError):
                for at in range(len(data)):
                    self.wfile.write(data[at : at + 1])
                    self.wfile.flush()
                    time.sleep(TRICKLE_S)
        elif fault.action == "huge":
            self._head(fault.status, "Huge", list(fault.headers.items()), fault.size)
            with contextlib.suppress(OSError):
                for part in _zeros(fault.size):
                    self.wfile.write(part)
        else:  # hold
            if fault.send_bytes:
                status, reason, kept, data = proxy.forward(self.command, self.path, headers, body)
                self._head(status, reason, kept, len(data))
                with contextlib.suppress(OSError):
                    self.wfile.write(data[: fault.send_bytes])
                    self.wfile.flush()
            proxy.wait_held()

    def _head(self, status: int, reason: str, headers: list[tuple[str, str]], size: int) -> None:
        self.send_response(status, reason)
        for key, value in headers:
            if key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()

    def _send(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
        size = len(body)
        if self.command == "HEAD":  # the object's size, as moto said it
            said = [v for k, v in headers if k.lower() == "content-length"]
            size = int(said[0]) if said else 0
        self._head(status, reason, headers, size)
        if self.command != "HEAD":
            with contextlib.suppress(OSError):
                self.wfile.write(body)

    def _reset(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()


def _zeros(size: int) -> Iterator[bytes]:
    block = b"0" * CHUNK
    sent = 0
    while sent < size:
        part = block[: min(CHUNK, size - sent)]
        sent += len(part)
        yield part


@pytest.fixture
def s3_faults(s3_server: S3Server) -> Iterator[FaultProxy]:
    """A proxy of this test in front of the session's moto server."""
    proxy = FaultProxy(s3_server.endpoint).start()
    try:
        yield proxy
    finally:
        proxy.stop()
