"""Retrying a remote call with backoff, under a bound on the total time an operation takes.

`RetryPolicy` says how often to try and how long to wait in between; a `Deadline` holds
the time an operation has left; `call_with_retries` runs attempts until one succeeds, a
failure is not worth another try, the attempts run out, or the next wait would pass the
deadline. What counts as a transient failure, and how long the server asked us to wait,
is the caller's to say through a classifier returning a `TryAgain`. Sleeping and the
clock are parameters, so tests run the waits without spending them.

`bounded_by` makes a deadline the thread's own for a block, so that the reads below the
call (a socket's, a body's, which no caller's argument reaches) end by it too (`current`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True, kw_only=True)
class TryAgain:
    """The verdict on a transient failure: worth another attempt.

    `after`: the wait the server asked for (retry-after, a rate-limit reset), used as is.
    `at_least`: a floor under the backoff that grows with every retry, for servers that
    ask to wait "at least" some time without saying how long (GitHub's secondary limit).
    """

    reason: str
    after: float | None = None
    at_least: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often to try one request and how long to wait, and the bound on the whole."""

    attempts: int = 5  # tries of one request, the first included
    initial_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 30.0  # caps the backoff; waits a server asks for are not capped
    total: float = 900.0  # seconds one operation may take, waits included
    request_timeout: float = 120.0  # seconds one request may wait on the network

    def __post_init__(self) -> None:
        problems = []
        if self.attempts < 1:
            problems.append(f"attempts must be at least 1, got {self.attempts}")
        if self.initial_delay < 0 or self.max_delay < 0:
            problems.append("delays must not be negative")
        if self.factor < 1:
            problems.append(f"factor must be at least 1, got {self.factor}")
        if not self.total > 0 or not self.request_timeout > 0:
            problems.append("total and request_timeout must be positive")
        if problems:
            raise ValueError("; ".join(problems))

    def backoff(self, retry: int) -> float:
        """The exponential backoff before retry number `retry` (1 for the first retry)."""
        return min(self.max_delay, self._grown(self.initial_delay, retry))

    def _grown(self, start: float, retry: int) -> float:
        if start == 0:
            return 0.0
        try:
            return start * self.factor ** max(retry - 1, 0)
        except OverflowError:
            return math.inf

    def delay(self, retry: int, verdict: TryAgain) -> float:
        """How long to wait before retry number `retry` after `verdict`."""
        if verdict.after is not None:
            return max(verdict.after, 0.0)
        return max(self.backoff(retry), self._grown(verdict.at_least, retry))


class Deadline:
    """The time left of one operation's budget, read from an injectable clock."""

    def __init__(self, total: float, clock: Clock) -> None:
        self._clock = clock
        self._start = clock()
        self.total = total

    def elapsed(self) -> float:
        return self._clock() - self._start

    def remaining(self) -> float:
        return self.total - self.elapsed()


_THREADS_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "deadline", default=None
)


@contextlib.contextmanager
def bounded_by(deadline: Deadline | None) -> Iterator[None]:
    """Inside the block, `deadline` is this thread's (`current`); None: none."""
    token = _THREADS_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _THREADS_DEADLINE.reset(token)


def current() -> Deadline | None:
    """The deadline the innermost `bounded_by` block of this thread set, if any."""
    return _THREADS_DEADLINE.get()


class RetryExhausted(Exception):
    """Attempts or time ran out. The message names the operation and the last failure."""

    def __init__(
        self, *, what: str, attempts: int, elapsed: float, last: str, out_of_time: bool
    ) -> None:
        self.what = what
        self.attempts = attempts
        self.elapsed = elapsed
        self.last = last
        self.out_of_time = out_of_time
        limit = "the time bound" if out_of_time else "the retry limit"
        plural = "" if attempts == 1 else "s"
        super().__init__(
            f"{what}: gave up at {limit} after {attempts} attempt{plural} in "
            f"{elapsed:.0f} s; last failure: {last}"
        )


def call_with_retries(
    attempt: Callable[[int], T],
    *,
    classify: Callable[[Exception], TryAgain | None],
    policy: RetryPolicy,
    deadline: Deadline,
    sleep: Sleep,
    what: str,
    on_retry: Callable[[TryAgain, float, int], None] | None = None,
) -> T:
    """Run `attempt(retry)` (retry counts from 0) until it returns.

    A failure that `classify` maps to None propagates unchanged. A transient one is
    retried after `policy.delay`, unless the attempts are used up or the wait would end
    past the deadline: then `RetryExhausted` is raised at once, without sleeping.
    `on_retry(verdict, delay, retry)` is told about every wait before it starts.
    """
    if deadline.remaining() <= 0:
        raise RetryExhausted(
            what=what,
            attempts=0,
            elapsed=deadline.elapsed(),
            last="no time left",
            out_of_time=True,
        )
    retry = 0
    while True:
        try:
            return attempt(retry)
        except Exception as error:
            verdict = classify(error)
            if verdict is None:
                raise
            retry += 1
            if retry >= policy.attempts:
                raise RetryExhausted(
                    what=what,
                    attempts=retry,
                    elapsed=deadline.elapsed(),
                    last=verdict.reason,
                    out_of_time=False,
                ) from None
            delay = policy.delay(retry, verdict)
            if delay >= deadline.remaining():
                raise RetryExhausted(
                    what=what,
                    attempts=retry,
                    elapsed=deadline.elapsed(),
                    last=f"{verdict.reason} (the next try would wait {delay:.0f} s)",
                    out_of_time=True,
                ) from None
            if on_retry is not None:
                on_retry(verdict, delay, retry)
            sleep(delay)
