"""Fault injection for the stand-in GitHub: what to break, where, and how often.

A :class:`Fault` matches requests by method, a regular expression searched in the path
(query string excluded) and the origin ("api", "uploads", "storage" or "any"), and fires
``count`` times. Its ``action`` is one of

``"status"``
    answer ``status`` with ``body`` and ``headers`` without doing the work; the request
    body is read and discarded first. With ``leave_state`` set on an upload, an empty
    asset in that state (GitHub's ``"starter"``) is left behind, as GitHub's 502 can.
``"store_then"``
    do the work (store the asset, create the release, ...), then answer ``status``
    (502 by default) instead of the real response: the client sees a failure, the state
    holds the result.
``"reset"``
    read ``read_bytes`` of the request body (half of it when ``None``), then close the
    socket without an answer. ``leave_state`` works as for ``"status"``.

A ``"status"`` answer can also come the way a hostile or failing server sends it:
``hold`` seconds before anything is sent (a server that stalls), its body sent ``repeat``
times over as one answer (Content-Length says the whole: a huge answer, streamed without
being held), ``trickle`` seconds before each repetition (a server that trickles). What
went out of such a body before the client hung up is :meth:`FaultSet.sent`.

The helpers at the bottom build the rate-limit answers GitHub gives, in the primary form
and the three secondary forms.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Origin = Literal["api", "uploads", "storage", "any"]
Action = Literal["status", "store_then", "reset"]

RATE_LIMIT_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
SECONDARY_DOCS = (
    "https://docs.github.com/free-pro-team@latest/rest/overview/"
    "rate-limits-for-the-rest-api#about-secondary-rate-limits"
)
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID "
    "C0DE:1A2B:3C4D5E:6F7A8B:6751F00D."
)


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One injected failure; see the module docstring for the actions."""

    method: str = "*"
    path: str = ".*"
    origin: Origin = "any"
    action: Action = "status"
    status: int = 502
    body: bytes | str | Mapping[str, object] = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    count: int = 1
    leave_state: str | None = None
    read_bytes: int | None = None
    rate_limit_headers: bool = True
    """Whether the usual x-ratelimit-* headers go with the answer (``headers`` win)."""
    reset_in: int | None = None
    """When set, ``x-ratelimit-reset`` is this many seconds after the moment of the answer."""
    hold: float = 0.0
    """Seconds the answer waits before its first byte (a ``"status"`` answer)."""
    repeat: int = 1
    """How many times over the body is sent, as one answer (a ``"status"`` answer)."""
    trickle: float = 0.0
    """Seconds before each repetition of the body (a ``"status"`` answer)."""

    def matches(self, method: str, path: str, origin: str) -> bool:
        return (
            self.method in ("*", method.upper())
            and self.origin in ("any", origin)
            and re.search(self.path, path) is not None
        )

    def body_bytes(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(dict(self.body), separators=(",", ":")).encode()


class FaultSet:
    """The faults armed on one stand-in. Thread-safe; the first matching fault fires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[tuple[Fault, list[int]]] = []
        self._fired: list[Fault] = []
        self._sent: dict[int, int] = {}

    def add(self, fault: Fault) -> Fault:
        if fault.count < 1:
            raise ValueError("a fault fires at least once (count >= 1)")
        with self._lock:
            self._armed.append((fault, [fault.count]))
        return fault

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    def take(self, method: str, path: str, origin: str) -> Fault | None:
        """The fault that fires for this request, if any (its count drops by one)."""
        with self._lock:
            for index, (fault, left) in enumerate(self._armed):
                if fault.matches(method, path, origin):
                    left[0] -= 1
                    if left[0] == 0:
                        del self._armed[index]
                    self._fired.append(fault)
                    return fault
        return None

    def remaining(self, fault: Fault) -> int:
        """How many more times ``fault`` will fire (0 once it is spent)."""
        with self._lock:
            return sum(left[0] for armed, left in self._armed if armed is fault)

    def count_sent(self, fault: Fault, size: int) -> None:
        with self._lock:
            self._sent[id(fault)] = self._sent.get(id(fault), 0) + size

    def sent(self, fault: Fault) -> int:
        """The bytes of ``fault``'s bodies that went out, over all its firings (a client
        that hangs up early stops one)."""
        with self._lock:
            return self._sent.get(id(fault), 0)

    @property
    def fired(self) -> tuple[Fault, ...]:
        """Every firing so far, in order (a fault appears once per firing)."""
        with self._lock:
            return tuple(self._fired)

    @property
    def pending(self) -> tuple[Fault, ...]:
        with self._lock:
            return tuple(fault for fault, _ in self._armed)


def primary_rate_limit(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "api",
    count: int = 1,
    reset_in: int = 2,
    user_id: int = 1001,
) -> Fault:
    """403 with ``x-ratelimit-remaining: 0`` and a reset ``reset_in`` seconds after the answer.

    githubkit sleeps 60 s instead of 0 when the reset has already passed by the time it
    reads the answer, so keep ``reset_in`` at 2 or more in tests."""
    return Fault(
        method=method,
        path=path,
        origin=origin,
        count=count,
        status=403,
        body={
            "message": (
                f"API rate limit exceeded for user ID {user_id}. If you reach out to GitHub "
                "Support for help, please include the request ID C0DE:1A2B:3C4D5E:6F7A8B:"
                "6751F00D and timestamp 2026-11-30 09:00:00 UTC."
            ),
            "documentation_url": RATE_LIMIT_DOCS,
            "status": "403",
        },
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-used": "5000"},
        reset_in=reset_in,
    )


def _secondary_limit(
    status: int,
    *,
    method: str,
    path: str,
    origin: Origin,
    count: int,
    retry_after: int | None = None,
    rate_limit_headers: bool = True,
) -> Fault:
    """A secondary rate limit answer: GitHub's message, and ``retry-after`` when given."""
    return Fault(
        method=method,
        path=path,
        origin=origin,
        count=count,
        status=status,
        body={"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS},
        headers={} if retry_after is None else {"retry-after": str(retry_after)},
        rate_limit_headers=rate_limit_headers,
    )


def rate_limit_429_retry_after(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "api",
    count: int = 1,
    retry_after: int = 1,
) -> Fault:
    """429 Too Many Requests with ``retry-after``."""
    return _secondary_limit(
        429, method=method, path=path, origin=origin, count=count, retry_after=retry_after
    )


def secondary_403_retry_after(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "api",
    count: int = 1,
    retry_after: int = 1,
) -> Fault:
    """Secondary limit, first form: 403 with ``retry-after`` (remaining is not 0)."""
    return _secondary_limit(
        403, method=method, path=path, origin=origin, count=count, retry_after=retry_after
    )


def secondary_403_message(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "api",
    count: int = 1,
) -> Fault:
    """Secondary limit, second form: 403 whose only sign is the message (no retry-after,
    remaining not 0). githubkit does not retry it; GitHub says wait at least a minute."""
    return _secondary_limit(403, method=method, path=path, origin=origin, count=count)


def secondary_429_bare(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "api",
    count: int = 1,
) -> Fault:
    """Secondary limit, third form: 429 with no rate-limit header and no retry-after."""
    return _secondary_limit(
        429, method=method, path=path, origin=origin, count=count, rate_limit_headers=False
    )


def server_errors(
    *,
    method: str = "*",
    path: str = ".*",
    origin: Origin = "any",
    count: int = 1,
    status: int = 502,
) -> Fault:
    """``count`` consecutive 5xx answers (a storm when ``count`` exceeds the retries)."""
    message = {500: "Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    return Fault(
        method=method,
        path=path,
        origin=origin,
        count=count,
        status=status,
        body={"message": message.get(status, "Server Error")},
    )
