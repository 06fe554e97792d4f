"""httpcore's network backend with a deadline: each socket operation (connect, TLS, each read
and write) of a request has its timeout cut to the time the thread's deadline leaves
(`retry.bounded_by`), and a timeout the cut caused says the deadline passed. A timeout
bounds one read, so without it a server that trickles its status line and headers a byte
within each read holds a request forever. release.remote.httpclient hands it to its
clients' pools.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import httpcore

from release.remote import retry

_T = TypeVar("_T")


def _within(
    operation: Callable[[float | None], _T],
    timeout: float | None,
    late: type[httpcore.TimeoutException],
) -> _T:
    """`operation(timeout)`, its timeout cut to the time this thread's deadline leaves; a
    timeout the cut caused (or no time left) is `late`, saying the deadline passed."""
    deadline = retry.current()
    if deadline is None:
        return operation(timeout)
    left = deadline.remaining()
    if timeout is not None and timeout < left:
        return operation(timeout)
    passed = f"the {deadline.total:.0f} s deadline passed"
    if left <= 0:
        raise late(passed)
    try:
        return operation(left)
    except httpcore.TimeoutException:
        raise late(passed) from None


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _within(lambda t: self._stream.read(max_bytes, t), timeout, httpcore.ReadTimeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _within(lambda t: self._stream.write(buffer, t), timeout, httpcore.WriteTimeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            _within(
                lambda t: self._stream.start_tls(ssl_context, server_hostname, t),
                timeout,
                httpcore.ConnectTimeout,
            )
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend, its streams cut to the thread's deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        def connect(t: float | None) -> httpcore.NetworkStream:
            return self._backend.connect_tcp(host, port, t, local_address, socket_options)

        return _DeadlineStream(_within(connect, timeout, httpcore.ConnectTimeout))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        def connect(t: float | None) -> httpcore.NetworkStream:
            return self._backend.connect_unix_socket(path, t, socket_options)

        return _DeadlineStream(_within(connect, timeout, httpcore.ConnectTimeout))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)
