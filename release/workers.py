"""Threads that read from servers for a command: `Workers`, daemon threads that run calls
in the order given.

A command stopped (^C, the SIGTERM of a cancelled CI job) while a server stalls a download
ends at once: a ThreadPoolExecutor's threads are waited for at exit, and a stalled read
holds its thread for the client's read timeout (60 s). For calls that only wait on a
server: a thread left behind at exit is killed with the process. A result is waited for
in short steps, so that the signal is handled whichever thread the kernel gave it to.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

_In = TypeVar("_In")
_Out = TypeVar("_Out")


# How often a thread waiting for a result runs Python: a signal the kernel handed to a
# worker thread (Linux picks any thread of the process that does not block it) runs its
# handler only where the main thread runs Python, and an untimed wait never would.
_WAKE_S = 0.2


def result(future: Future[_Out]) -> _Out:
    """`future.result()`, waited for in steps, so that a signal is handled while waiting
    (every wait of the main thread for a thread's work goes through here)."""
    while True:
        try:
            return future.result(timeout=_WAKE_S)
        except TimeoutError:
            if future.done():  # the call's own TimeoutError, or it ended just now
                return future.result()


def result_within(future: Future[_Out], remaining: Callable[[], float]) -> _Out | None:
    """`result(future)`, or None once `remaining()` is 0 or less and it has not ended."""
    while True:
        try:
            return future.result(timeout=max(0.0, min(_WAKE_S, remaining())))
        except TimeoutError:
            if future.done():
                return future.result()
            if remaining() <= 0:
                return None


class Workers:
    """`count` daemon threads; `close` (or the `with` block's end) lets them end once the
    calls queued before are done. A `with` block left by an exception (^C) starts none of
    the calls still queued."""

    def __init__(self, count: int) -> None:
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, daemon=True) for _ in range(max(1, count))
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, call = task
            if self._stopping.is_set() or not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as error:  # the caller's to raise, as Future.result does
                future.set_exception(error)

    def map(self, function: Callable[[_In], _Out], items: Iterable[_In]) -> Iterator[_Out]:
        """`function` of each item, run by the threads, in the items' order (a call's
        exception raised where its result is due)."""
        futures: list[Future[_Out]] = []
        for item in items:
            future: Future[_Out] = Future()
            self._tasks.put((future, functools.partial(function, item)))
            futures.append(future)
        return (result(future) for future in futures)

    def map_within(
        self, function: Callable[[_In], _Out], items: Iterable[_In], remaining: Callable[[], float]
    ) -> Iterator[_Out | None]:
        """`map`, waited for only while `remaining()` (seconds) is above 0: a call still
        running then is None, its thread left to end with the command (an inspection of a
        hostile file does not wait on a server, and would run on past the time limit)."""
        futures: list[Future[_Out]] = []
        for item in items:
            future: Future[_Out] = Future()
            self._tasks.put((future, functools.partial(function, item)))
            futures.append(future)
        return (result_within(future, remaining) for future in futures)

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            self._stopping.set()
        self.close()
