"""The nightly channel's safety rules, pure (issue 39): deletion decided afresh from the
state as written, the keep-list and what the /nightly/ pages link, never replayed from a
stored pruning list; a state of another project refused; hostile JSON in the state and in
a project page a one-line error; an S3 call's total deadline."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from packaging.version import Version

from release.errors import PublishError
from release.matrix.nightly import keep_list_problem
from release.nightly.layout import GENERATION
from release.nightly.promotion import Retention, completed, deletions, registered, settled
from release.nightly.publisher import _generation
from release.nightly.state import (
    MAX_STATE_BYTES,
    NightlyState,
    Pruning,
    Shape,
    from_bytes,
    to_bytes,
)
from release.remote.s3 import Limits
from release.remote.simple_index import SIMPLE_JSON, parse_project_page
from tests.unit.test_promotion import NOW, SHAPE, commit, files

RULE = Retention(keep=2, pins=frozenset(), fallout="delete")


def complete(state: NightlyState, n: int, rule: Retention = RULE) -> NightlyState:
    return completed(
        state, commit=commit(n), shape=SHAPE, files=files(n), pages={}, rule=rule, now=NOW
    ).state


def channel(*numbers: int) -> NightlyState:
    state = NightlyState(project="k3-kernels")
    for n in numbers:
        state = complete(state, n)
    return state


def version(n: int) -> Version:
    return Version(SHAPE.version(commit(n).time))


def test_a_commit_completed_again_after_it_fell_out_is_kept_and_leaves_the_pruning_list() -> None:
    state = channel(1, 2, 3, 4)
    assert commit(1).sha in {p.commit for p in state.pruning}
    again = registered(state, commit(1), SHAPE, now=NOW)  # its job re-run after the reaping
    assert again is not None
    done = completed(
        again, commit=commit(1), shape=SHAPE, files=files(1), pages={}, rule=RULE, now=NOW
    )
    assert done.state.kept_commit(commit(1).sha) is not None
    assert commit(1).sha not in {p.commit for p in done.state.pruning}
    assert commit(1).sha not in {p.commit for p in done.fallen}
    delete, _ = deletions(done.state, publishing=commit(1).sha, pins=(), served=())
    assert commit(1).sha not in {p.commit for p in delete}


def test_deletion_never_takes_a_kept_published_pinned_or_served_commit() -> None:
    state = channel(1, 2, 3, 4, 5, 6)
    entry = {n: Pruning(commit=commit(n).sha, time=commit(n).time, shape=SHAPE.id,
                        action="delete") for n in range(1, 7)}  # fmt: skip
    # a stored list that names every commit: the kept (5, 6; 6 served), and 1 to 4
    hostile = replace(state, pruning=tuple(entry.values()))
    delete, spared = deletions(
        hostile, publishing=commit(4).sha, pins={version(3)}, served={commit(2).sha}
    )
    assert [p.commit for p in delete] == [commit(1).sha]
    reasons = {p.commit: why for p, why in spared}
    assert reasons == {
        commit(2).sha: "linked by a /nightly/ page",
        commit(3).sha: "pinned by the keep-list",
        commit(4).sha: "being published by this run",
        commit(5).sha: "kept by the state",
        commit(6).sha: "kept by the state",
    }


def test_deletion_spares_what_nightly_serves_and_replaced_and_what_is_uploading() -> None:
    state = channel(1, 2)
    uploading = registered(state, commit(3), SHAPE, now=NOW)
    assert uploading is not None
    names = [commit(n) for n in (1, 2, 3)]
    hostile = replace(
        uploading,
        kept=(),
        pruning=tuple(Pruning(commit=c.sha, time=c.time, shape=SHAPE.id, action="archive")
                      for c in names),
    )  # fmt: skip
    delete, spared = deletions(hostile, publishing="f" * 40, pins=(), served=())
    assert delete == ()
    assert {why for _, why in spared} == {
        "the commit /nightly/ serves or replaced",
        "being uploaded",
    }


def test_done_pruning_leaves_the_state_and_a_kept_commit_is_never_listed() -> None:
    state = channel(1, 2, 3)
    (first,) = state.pruning
    kept = state.kept[0]
    listed = replace(state, pruning=(*state.pruning, Pruning(
        commit=kept.commit, time=kept.time, shape=kept.shape, action="delete")))  # fmt: skip
    after = settled(listed, {first.commit})
    assert after is not None
    assert after.pruning == ()
    assert after.generation == listed.generation + 1
    assert settled(after, {first.commit}) is None  # nothing left to change: no write


def test_a_state_of_another_project_or_layout_is_refused_in_one_line() -> None:
    state = channel(1, 2)
    data = to_bytes(state)
    assert from_bytes(data, "state.json", project="k3-kernels") == state
    with pytest.raises(PublishError) as other:
        from_bytes(data, "s3://b/state.json", project="flash-attn")
    assert "s3://b/state.json is the nightly state of 'k3-kernels', not of 'flash-attn'" in (
        other.value.message
    )
    assert "\n" not in other.value.message
    # the project field says ours, but the wheels are another project's: another layout
    foreign = Shape(base="0.1.1", wheels=("vllm-{version}-py3-none-any.whl",))
    mixed = replace(state, shapes={**state.shapes, foreign.id: foreign})
    with pytest.raises(PublishError, match="nightly state of 'vllm'"):
        from_bytes(to_bytes(mixed), "state.json", project="k3-kernels")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
        (b'{"schema":1,"shapes":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001, "nested too deep"),
        (b" " * (MAX_STATE_BYTES + 1), "more than the"),
        (b'{"schema":1,"shapes":{},"kept":[[1,2]],"project":"k"}', "kept"),
        (b'{"schema":1,"shapes":[],"project":"k"}', "shapes: not an object"),
        (
            b'{"schema":1,"shapes":{},"kept":[],"uploading":[],"pruning":[],"project":7,'
            b'"generation":1,"nightly":null,"roots":[]}',
            "project",
        ),
        (b"\xff\xfe", "state.json is not a nightly state"),
    ],
)
def test_a_hostile_state_is_one_line_never_a_traceback(data: bytes, reason: str) -> None:
    with pytest.raises(PublishError) as refused:
        from_bytes(data, "state.json", project="k3-kernels")
    assert "state.json is not a nightly state" in refused.value.message
    assert reason in refused.value.message
    assert "\n" not in refused.value.message
    assert len(refused.value.message) < 400


@pytest.mark.parametrize(
    "body",
    [
        b'{"files":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"files":[{"filename":1,"url":"x","hashes":{}}]}',
        b'{"files":{"a":1}}',
        b"[]",
        b"\xff",
    ],
)
def test_a_hostile_json_project_page_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError, match=r"PEP 691|not a|lacks|codec|Expecting|utf-8"):
        parse_project_page(body, SIMPLE_JSON, "https://pypi.example/simple/k3-kernels/")


def test_an_s3_calls_total_deadline_is_its_attempts_and_waits() -> None:
    limits = Limits()
    assert (limits.connect, limits.read, limits.attempts) == (10.0, 30.0, 3)
    assert limits.waits == 1.0 + 2.0
    assert limits.total == 3 * (10 + 30) + 3
    assert limits.policy.total == limits.total
    assert limits.policy.backoff(1) == 1.0
    assert limits.policy.backoff(2) == 2.0
    short = Limits(connect=1, read=2, attempts=2, first_wait=0.5)
    assert short.total == 2 * 3 + 0.5


def test_keep_list_state_bytes_stay_json() -> None:
    state = channel(1, 2, 3)
    assert json.loads(to_bytes(state))["pruning"][0]["commit"] == commit(1).sha


def test_a_state_whose_names_are_no_wheels_is_refused_in_one_line() -> None:
    """A shape whose base is no version, a pointer file that is no wheel: both passed the
    state's reading and broke later, on parsing the name (`a bug in release`)."""
    state = channel(1, 2)
    broken = Shape(base="not a version", wheels=state.shapes[next(iter(state.shapes))].wheels)
    shaped = replace(state, shapes={**state.shapes, broken.id: broken})
    with pytest.raises(PublishError, match=r"state.json is not a nightly state \(a wheel name"):
        from_bytes(to_bytes(shaped), "state.json", project="k3-kernels")
    data = json.loads(to_bytes(channel(1, 2)))
    data["nightly"]["files"][0]["filename"] = "index.html"
    with pytest.raises(PublishError, match=r"filename is not a wheel's name"):
        from_bytes(json.dumps(data).encode(), "state.json", project="k3-kernels")


@pytest.mark.parametrize("pin", ["0.1.0.dev" + "9" * 5000, "0.1.0.dev²"])
def test_a_keep_list_pin_past_int_is_a_problem_not_a_bug(pin: str) -> None:
    assert keep_list_problem(pin) is not None


@pytest.mark.parametrize(
    ("generation", "read"), [("7", 7), ("²", -1), ("9" * 5000, -1), ("", -1), ("-3", -1)]
)
def test_a_pages_generation_is_a_counter_or_none(generation: str, read: int) -> None:
    assert _generation({GENERATION: generation}) == read


def test_a_state_whose_commit_ends_in_a_newline_is_refused() -> None:
    """A pattern's `$` matches before a trailing newline: the commit is matched whole."""
    state = channel(1, 2)
    sha = state.kept[0].commit
    data = to_bytes(state).replace(f'"{sha}"'.encode(), f'"{sha}\\n"'.encode(), 1)
    assert data != to_bytes(state)
    with pytest.raises(PublishError, match=r"state\.json is not a nightly state"):
        from_bytes(data, "state.json", project="k3-kernels")
