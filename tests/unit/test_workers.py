"""release.workers: calls run by daemon threads, results in the items' order, an exception
where its result is due (as ThreadPoolExecutor.map), and nothing queued started once a
`with` block is left by an exception."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from release import proc
from release.workers import Workers


def test_results_come_in_the_items_order_and_an_error_where_it_is_due() -> None:
    def slow_first(n: int) -> int:
        if n == 0:
            threading.Event().wait(0.2)
        if n == 3:
            raise ValueError("three")
        return n * 10

    with Workers(4) as pool:
        results = pool.map(slow_first, range(5))
        assert [next(results) for _ in range(3)] == [0, 10, 20]
        with pytest.raises(ValueError, match="three"):
            next(results)


def test_a_call_still_running_when_the_time_is_up_is_not_waited_for() -> None:
    # an inspection of a hostile shared object (a million section headers) ran three
    # minutes past audit's --timeout 20
    left = [1.0]
    stuck = threading.Event()

    def runs(n: int) -> int:
        if n == 1:
            stuck.wait(60)  # a call that does not end by itself while the test runs
        return n

    with Workers(2) as pool:
        results = pool.map_within(runs, [0, 1], lambda: left[0])
        first = next(results)
        left[0] = 0.0  # the time limit passes while the second call runs
        second = next(results)
    stuck.set()
    assert (first, second) == (0, None)


def test_a_block_left_by_an_exception_starts_nothing_still_queued() -> None:
    started: list[int] = []
    release = threading.Event()

    def held(n: int) -> int:
        started.append(n)
        release.wait(10)
        return n

    def interrupted(pool: Workers) -> None:
        with pool:
            pool.map(held, range(5))
            while not started:
                threading.Event().wait(0.01)
            raise KeyboardInterrupt

    pool = Workers(1)
    with pytest.raises(KeyboardInterrupt):
        interrupted(pool)
    release.set()
    for thread in pool._threads:  # it ends once it has taken (and skipped) what was queued
        thread.join(10)
        assert not thread.is_alive()
    assert started == [0]


def test_a_signal_a_worker_thread_received_still_stops_the_waiting_command() -> None:
    """Linux hands a process's SIGTERM to any thread that does not block it: where it was a
    worker held in a stalled read, the main thread, waiting for that call's result, must
    still run the handler (proc.interruptible's: KeyboardInterrupt) at once, instead of
    when the read gives up."""
    held = threading.Event()
    worker: list[int] = []

    def stalled(_: int) -> int:
        worker.append(threading.get_ident())
        held.wait(30)
        return 0

    def signal_the_worker() -> None:
        while not worker:
            threading.Event().wait(0.01)
        signal.pthread_kill(worker[0], signal.SIGTERM)

    start = time.monotonic()
    with proc.interruptible(), Workers(1) as pool:
        threading.Thread(target=signal_the_worker, daemon=True).start()
        results = pool.map(stalled, [0])
        with pytest.raises(KeyboardInterrupt):
            next(results)
    held.set()
    assert proc.last_signal() == signal.SIGTERM
    assert time.monotonic() - start < 20  # not the 30 s the stalled call holds its thread
