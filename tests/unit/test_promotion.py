"""release.nightly.promotion and release.nightly.state: the channel's decisions on
its state, pure, and the state's round trip."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from release.errors import PublishError
from release.matrix import Commit
from release.nightly.promotion import (
    ABANDONED_AFTER,
    FinalRelease,
    Retention,
    completed,
    falls_out_at_once,
    latest_final,
    order_problems,
    registered,
)
from release.nightly.state import (
    NightlyFile,
    NightlyState,
    Shape,
    from_bytes,
    to_bytes,
)

SHAPE = Shape(
    base="0.1.1",
    wheels=(
        "k3_kernels-{version}+cu129-py3-none-manylinux_2_28_x86_64.whl",
        "k3_kernels-{version}-py3-none-manylinux_2_28_x86_64.whl",
    ),
)
RULE = Retention(keep=3, pins=frozenset(), fallout="archive")
NOW = 1_900_000_000


def commit(n: int) -> Commit:
    return Commit(sha=f"{n:040x}", time=1_800_000_000 + 60 * n)


def files(n: int) -> tuple[NightlyFile, ...]:
    return tuple(
        NightlyFile(filename=name, sha256=f"{n:064x}", size=n, metadata_sha256="e" * 64)
        for name in SHAPE.wheel_names(commit(n).time)
    )


def complete(state: NightlyState, n: int, rule: Retention = RULE) -> NightlyState:
    done = completed(
        state, commit=commit(n), shape=SHAPE, files=files(n), pages={"p": "0" * 32},
        rule=rule, now=NOW,
    )  # fmt: skip
    return done.state


def test_the_newest_commit_by_time_is_promoted_whatever_the_order() -> None:
    state = NightlyState(project="k3-kernels")
    state = complete(state, 2)
    assert state.nightly is not None
    assert state.nightly.commit == commit(2).sha
    late = completed(
        state, commit=commit(1), shape=SHAPE, files=files(1), pages={}, rule=RULE, now=NOW
    )
    assert late.promoted is False
    assert late.state.nightly == state.nightly  # the pointer did not move
    assert {k.commit for k in late.state.kept} == {commit(1).sha, commit(2).sha}
    newer = complete(late.state, 3)
    assert newer.nightly is not None
    assert (newer.nightly.commit, newer.nightly.previous) == (commit(3).sha, commit(2).sha)
    assert newer.generation == 3
    assert newer.nightly.generation == 3


def test_retention_keeps_the_newest_the_pinned_and_what_nightly_serves() -> None:
    pinned = Version(SHAPE.version(commit(2).time))
    rule = replace(RULE, pins=frozenset({pinned}))
    state = NightlyState(project="k3-kernels")
    for n in range(1, 7):
        state = complete(state, n, rule)
    assert [k.commit for k in state.kept] == [commit(n).sha for n in (6, 5, 4, 2)]
    assert [p.commit for p in state.pruning] == [commit(1).sha, commit(3).sha]
    assert {p.action for p in state.pruning} == {"archive"}
    # a commit older than the kept ones is not worth uploading
    assert falls_out_at_once(state, commit(3), SHAPE, rule)
    assert not falls_out_at_once(state, commit(2), SHAPE, rule)  # pinned


def test_the_commit_nightly_replaced_is_kept_even_past_keep() -> None:
    rule = replace(RULE, keep=2)
    state = NightlyState(project="k3-kernels")
    for n in (10, 12, 11):  # 12 replaces 10 on /nightly/; 11 completes last
        state = complete(state, n, rule)
    assert state.nightly is not None
    assert (state.nightly.commit, state.nightly.previous) == (commit(12).sha, commit(10).sha)
    assert [k.commit for k in state.kept] == [commit(n).sha for n in (12, 11, 10)]
    state = complete(state, 13, rule)
    assert [k.commit for k in state.kept] == [commit(13).sha, commit(12).sha]
    assert [p.commit for p in state.pruning] == [commit(11).sha, commit(10).sha]


def test_a_registration_counts_once_and_an_abandoned_one_is_deleted() -> None:
    state = NightlyState(project="k3-kernels")
    first = registered(state, commit(5), SHAPE, now=NOW)
    assert first is not None
    assert first.uploading_commit(commit(5).sha) is not None
    assert registered(first, commit(5), SHAPE, now=NOW) is None  # a re-run writes nothing
    done = completed(
        first, commit=commit(6), shape=SHAPE, files=files(6), pages={}, rule=RULE,
        now=NOW + ABANDONED_AFTER + 1,
    )  # fmt: skip
    assert done.state.uploading == ()
    assert [(p.commit, p.action) for p in done.fallen] == [(commit(5).sha, "delete")]


def test_pruning_once_confirmed_leaves_the_state() -> None:
    state = NightlyState(project="k3-kernels")
    for n in range(1, 5):
        state = complete(state, n)
    assert [p.commit for p in state.pruning] == [commit(1).sha]
    after = completed(
        state, commit=commit(5), shape=SHAPE, files=files(5), pages={}, rule=RULE, now=NOW,
        pruned=[commit(1).sha],
    )  # fmt: skip
    assert [p.commit for p in after.state.pruning] == [commit(2).sha]
    assert set(after.state.shapes) == {SHAPE.id}


def test_the_state_round_trips_and_a_damaged_one_is_refused() -> None:
    state = NightlyState(project="k3-kernels")
    for n in range(1, 6):
        state = complete(state, n)
    data = to_bytes(state)
    assert from_bytes(data, "state.json") == state
    assert len(data) < 2000
    for damaged in (
        data.replace(b'"schema":1', b'"schema":2'),
        data.replace(SHAPE.id.encode(), b"0" * 12, 1),
        data.replace(commit(5).sha.encode(), b"not-a-commit"),
        b"{",
    ):
        with pytest.raises(PublishError, match=r"state\.json is not a nightly state"):
            from_bytes(damaged, "state.json")


def test_a_kept_commit_costs_a_short_line_of_the_state() -> None:
    state = NightlyState(project="k3-kernels")
    for n in range(1, 4):
        state = complete(state, n, replace(RULE, keep=1000))
    small = len(to_bytes(state))
    for n in range(4, 104):
        state = complete(state, n, replace(RULE, keep=1000))
    assert (len(to_bytes(state)) - small) / 100 < 80  # bytes per kept commit


def test_the_version_order_names_both_versions_and_the_variant() -> None:
    finals = [
        FinalRelease(
            destination="pypi (pypi)",
            version=Version("0.1.0"),
            variant="0.1.0 (the CUDA 13.0 variant)",
        )
    ]
    (problem,) = order_problems(Version("0.1.0.dev1733212345+cu129"), finals)
    assert "nightly 0.1.0.dev1733212345 does not sort above 0.1.0" in problem
    assert "the latest final release on pypi (pypi)" in problem
    assert "would pick 0.1.0 (the CUDA 13.0 variant) instead" in problem
    assert order_problems(Version("0.1.1.dev1"), finals) == []
    assert latest_final({Version("0.1.0"), Version("0.2.0rc1"), Version("0.1.1.dev3")}) == (
        Version("0.1.0")
    )
    assert latest_final({Version("0.2.0rc1")}) is None
