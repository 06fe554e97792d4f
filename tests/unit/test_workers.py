"""release.workers: calls run by daemon threads, results in the items' order, an exception
where its result is due (as ThreadPoolExecutor.map), and nothing queued started once a
`with` block is left by an exception."""

from __future__ import annotations

import threading

import pytest

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
