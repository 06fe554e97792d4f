"""RetryPolicy, Deadline and call_with_retries with a fake clock: no real waiting."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from release.remote.retry import Deadline, RetryExhausted, RetryPolicy, TryAgain, call_with_retries


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Transient(Exception):
    pass


def transient_only(error: Exception) -> TryAgain | None:
    return TryAgain(reason=str(error) or "transient") if isinstance(error, Transient) else None


def failing(times: int, error: Exception | None = None) -> tuple[list[int], Callable[[int], str]]:
    """An attempt that fails `times` times, then returns "ok"; and the retries it saw."""
    seen: list[int] = []

    def attempt(retry: int) -> str:
        seen.append(retry)
        if len(seen) <= times:
            raise error or Transient(f"failure {len(seen)}")
        return "ok"

    return seen, attempt


def run(
    attempt: Callable[[int], str],
    policy: RetryPolicy,
    fake: FakeTime,
    *,
    classify: Callable[[Exception], TryAgain | None] = transient_only,
) -> str:
    return call_with_retries(
        attempt,
        classify=classify,
        policy=policy,
        deadline=Deadline(policy.total, fake.clock),
        sleep=fake.sleep,
        what="fetch x",
    )


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_delay=1.0, factor=2.0, max_delay=10.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_backoff_of_a_huge_retry_number_is_the_cap() -> None:
    policy = RetryPolicy(initial_delay=1.0, factor=10.0, max_delay=30.0)
    assert policy.backoff(10_000) == 30.0
    assert policy.delay(10_000, TryAgain(reason="x")) == 30.0


def test_a_server_given_wait_is_used_as_is_and_not_capped() -> None:
    policy = RetryPolicy(max_delay=5.0)
    assert policy.delay(1, TryAgain(reason="429", after=7.0)) == 7.0
    assert policy.delay(3, TryAgain(reason="reset", after=300.0)) == 300.0
    assert policy.delay(1, TryAgain(reason="reset passed", after=-3.0)) == 0.0


def test_an_at_least_floor_grows_with_each_retry() -> None:
    policy = RetryPolicy(initial_delay=1.0, factor=2.0, max_delay=30.0)
    verdict = TryAgain(reason="secondary limit", at_least=60.0)
    assert [policy.delay(n, verdict) for n in (1, 2, 3)] == [60.0, 120.0, 240.0]


@pytest.mark.parametrize(
    "bad",
    [
        {"attempts": 0},
        {"initial_delay": -1.0},
        {"factor": 0.5},
        {"total": 0.0},
        {"request_timeout": -1.0},
    ],
)
def test_nonsense_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_transient_failures_are_retried_until_success() -> None:
    fake = FakeTime()
    seen, attempt = failing(2)
    assert run(attempt, RetryPolicy(attempts=5), fake) == "ok"
    assert seen == [0, 1, 2]
    assert fake.sleeps == [1.0, 2.0]


def test_other_failures_propagate_unchanged_without_waiting() -> None:
    fake = FakeTime()
    _, attempt = failing(1, KeyError("not transient"))
    with pytest.raises(KeyError, match="not transient"):
        run(attempt, RetryPolicy(), fake)
    assert fake.sleeps == []


def test_running_out_of_attempts_names_the_operation_and_last_failure() -> None:
    fake = FakeTime()
    seen, attempt = failing(100)
    with pytest.raises(RetryExhausted) as exhausted:
        run(attempt, RetryPolicy(attempts=3), fake)
    assert seen == [0, 1, 2]
    assert fake.sleeps == [1.0, 2.0]
    assert not exhausted.value.out_of_time
    assert str(exhausted.value).startswith("fetch x: gave up at the retry limit after 3 attempts")
    assert str(exhausted.value).endswith("last failure: failure 3")


def test_the_time_bound_stops_before_a_wait_that_would_pass_it() -> None:
    fake = FakeTime()
    seen, attempt = failing(100)
    policy = RetryPolicy(attempts=100, initial_delay=1.0, max_delay=8.0, total=20.0)
    with pytest.raises(RetryExhausted) as exhausted:
        run(attempt, policy, fake)
    assert fake.sleeps == [1.0, 2.0, 4.0, 8.0]
    assert sum(fake.sleeps) <= policy.total
    assert len(seen) == 5
    assert exhausted.value.out_of_time
    assert "time bound" in str(exhausted.value)
    assert "would wait 8 s" in str(exhausted.value)


def test_a_server_wait_longer_than_the_budget_fails_at_once() -> None:
    fake = FakeTime()

    def rate_limited(error: Exception) -> TryAgain:
        return TryAgain(reason="rate limit resets in 3600 s", after=3600.0)

    _, attempt = failing(1)
    with pytest.raises(RetryExhausted) as exhausted:
        run(attempt, RetryPolicy(total=600.0), fake, classify=rate_limited)
    assert fake.sleeps == []
    assert "rate limit resets in 3600 s" in str(exhausted.value)


def test_a_spent_deadline_stops_before_the_first_attempt() -> None:
    fake = FakeTime()
    policy = RetryPolicy(total=10.0)
    deadline = Deadline(policy.total, fake.clock)
    fake.now += 11.0
    seen, attempt = failing(0)
    with pytest.raises(RetryExhausted, match="no time left"):
        call_with_retries(
            attempt,
            classify=transient_only,
            policy=policy,
            deadline=deadline,
            sleep=fake.sleep,
            what="fetch x",
        )
    assert seen == []


def test_on_retry_hears_about_every_wait_before_it() -> None:
    fake = FakeTime()
    heard: list[tuple[str, float, int, int]] = []
    _, attempt = failing(2)
    call_with_retries(
        attempt,
        classify=transient_only,
        policy=RetryPolicy(),
        sleep=fake.sleep,
        deadline=Deadline(100.0, fake.clock),
        what="fetch x",
        on_retry=lambda verdict, delay, retry: heard.append(
            (verdict.reason, delay, retry, len(fake.sleeps))
        ),
    )
    assert heard == [("failure 1", 1.0, 1, 0), ("failure 2", 2.0, 2, 1)]
