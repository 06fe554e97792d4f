"""release.destinations.buildtag: which build of a wheel's name a rebuild goes as, and its
decision, against a destination that holds what each test says (a stand-in for the
destination, which is not this project's code)."""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from release.destinations.buildtag import (
    MAX_BUILD,
    held_builds,
    next_build,
    rebuilt_reason,
    with_build_tags,
)
from release.destinations.decide import Action, FileDecision, PublishPlan, RemoteFile
from release.errors import PublishError
from release.records.manifest import WheelEntry
from release.wheelfile import WheelName
from release.wheelrewrite import with_build_tag
from tests.integration.wheels import entry_for, make_wheel, pypi_destination

NAME = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"


def build(number: int) -> str:
    return NAME.replace("-py3-", f"-{number}-py3-")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def held(sha256: str | None, *, state: str = "uploaded") -> RemoteFile:
    return RemoteFile(name="w", size=None, sha256=sha256, url="u", state=state)


# -- the choice -----------------------------------------------------------------------------


def rewritten(number: int) -> str:
    return f"{number:064x}"  # the sha256 of the wheel rewritten as build `number`


@pytest.mark.parametrize(
    ("builds", "expected"),
    [
        ({}, (1, False)),  # the name alone is held: build 1
        ({1: held("0" * 64)}, (2, False)),
        ({1: held("0" * 64), 3: held("0" * 64)}, (4, False)),  # above the highest, not a gap
        ({1: held(rewritten(1))}, (1, True)),  # these bytes are there: a re-run
        ({1: held(rewritten(1)), 2: held("0" * 64)}, (1, True)),
        ({1: held("0" * 64), 2: held(None, state="starter")}, (2, False)),  # a leftover holds none
        ({1: held(None)}, (2, False)),  # no digest to compare: other bytes as far as is known
    ],
)
def test_the_next_build_is_above_every_build_held_unless_these_bytes_are_held(
    builds: dict[int, RemoteFile], expected: tuple[int, bool]
) -> None:
    assert next_build(builds, rewritten) == expected


def test_a_wheel_built_with_a_build_tag_goes_above_its_own() -> None:
    assert next_build({}, rewritten, after=7) == (8, False)


def test_past_the_last_build_asked_for_a_new_version_is_the_answer() -> None:
    with pytest.raises(PublishError) as caught:
        next_build({MAX_BUILD: held("0" * 64)}, rewritten)
    assert caught.value.hint == "release a new version"


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([build(1000)], 1000),  # past the names asked for one by one
        ([build(5).replace("-5-", "-5a-")], 5),  # (5, "a"): above 5, below 6
        ([build(7).replace("-7-", "-07-")], 7),  # pip reads build 7
        ([build(5).replace("k3_kernels", "K3_Kernels")], 5),  # the same project
        ([build(5).replace("0.1.0", "0.1")], 5),  # the same version
        ([build(5).replace("k3_kernels", "k3.kernels")], 5),
        ([build(3), build(9), NAME], 9),
        ([build(5).replace("0.1.0", "0.1.1")], 0),  # another version
        ([build(5).replace("x86_64", "aarch64")], 0),  # no tag in common
        ([build(5).replace("k3_kernels", "k4_kernels")], 0),
        ([NAME, "k3_kernels-0.1.0-abc-py3-none-manylinux_2_28_x86_64.whl", "x.txt"], 0),
    ],
)
def test_the_builds_held_are_read_by_value_whatever_their_spelling(
    names: list[str], expected: int
) -> None:
    assert held_builds(WheelName.parse(NAME), names) == expected


def test_the_next_build_goes_above_the_highest_held_by_value() -> None:
    assert next_build({}, rewritten, above=5) == (6, False)
    assert next_build({1: held("0" * 64)}, rewritten, above=7) == (8, False)


def test_above_the_last_build_number_a_new_version_is_the_answer() -> None:
    with pytest.raises(PublishError) as caught:
        next_build({}, rewritten, above=1000)
    assert caught.value.hint == "release a new version"
    assert "above build 1000" in caught.value.message


def test_the_reason_says_the_name_it_goes_as_and_why() -> None:
    assert rebuilt_reason(build(1), NAME, "new") == (
        f"as {build(1)} (rebuilt: the destination holds other bytes under {NAME})"
    )
    assert rebuilt_reason(build(1), NAME, "same sha256") == (
        f"as {build(1)}, same sha256 (rebuilt: the destination holds other bytes under {NAME})"
    )


# -- the decision, against a destination ----------------------------------------------------


class Holding:
    """A destination holding `files` (name -> bytes); with `digests` False it reports no
    sha256 and hashes a file only when asked with its exact size, as GitHub's publisher
    does without asset digests."""

    stages = False
    index_url = None
    name = "pypi"

    def __init__(
        self,
        files: Mapping[str, bytes],
        *,
        digests: bool = True,
        frozen: str | None = None,
        refused: Mapping[str, str] | None = None,
    ) -> None:
        self.files = dict(files)
        self.digests = digests
        self.frozen = frozen
        self.taken: str | None = None
        self.refused = dict(refused or {})
        self.asked: list[set[str]] = []

    def existing(self, files: Mapping[str, int], *, rehash: bool) -> Mapping[str, RemoteFile]:
        self.asked.append(set(files))
        return {
            name: RemoteFile(
                name=name,
                size=len(data),
                sha256=sha(data) if self.digests or files[name] == len(data) else None,
                url=f"https://held.example/{name}",
            )
            for name, data in self.files.items()
            if name in files
        }

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        return self.refused.get(entry.filename)

    def held_files(self) -> Collection[str]:
        return list(self.files)

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        return None

    def final_url(self, name: str) -> str:
        return f"https://new.example/{name}"

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        raise AssertionError("planning must not stage")

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        raise AssertionError("planning must not commit")


def conflict(dist: Path) -> tuple[FileDecision, bytes]:
    """The rebuilt wheel in `dist` and its CONFLICT (the destination holds other bytes)."""
    wheel = make_wheel(dist, payload=b"#rebuilt\n")
    assert wheel.name == NAME
    entry = entry_for(wheel, pypi_destination("http://127.0.0.1:1/"))
    decision = FileDecision(entry=entry, action=Action.CONFLICT, reason="exists", url="u")
    return decision, wheel.read_bytes()


def decided(
    destination: Holding, decision: FileDecision, tmp_path: Path
) -> tuple[FileDecision, Path]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    plan, rebuilt = with_build_tags(
        destination, PublishPlan(decisions=(decision,)), tmp_path / "dist", scratch
    )
    (made,) = plan.decisions
    return made, rebuilt[NAME].path if NAME in rebuilt else scratch


def test_a_conflict_goes_as_build_1_said_so_with_its_bytes_in_scratch(tmp_path: Path) -> None:
    decision, data = conflict(tmp_path / "dist")
    destination = Holding({NAME: b"the old bytes"})
    made, path = decided(destination, decision, tmp_path)
    assert (made.action, made.rebuilt_from, made.entry.filename) == (Action.UPLOAD, NAME, build(1))
    assert made.reason == rebuilt_reason(build(1), NAME, "new")
    assert made.url == f"https://new.example/{build(1)}"
    tagged = with_build_tag(NAME, data, 1)[1]
    assert path.read_bytes() == tagged
    assert (made.entry.size, made.entry.sha256) == (len(tagged), sha(tagged))
    assert (made.entry.cell, made.entry.version) == (decision.entry.cell, decision.entry.version)
    assert len(destination.asked) == 1  # every build of the name, in one question
    assert {build(1), build(MAX_BUILD)} <= destination.asked[0]


def test_the_same_rebuild_again_is_identical_under_its_build(tmp_path: Path) -> None:
    decision, data = conflict(tmp_path / "dist")
    destination = Holding({NAME: b"old", build(1): with_build_tag(NAME, data, 1)[1]})
    made, _ = decided(destination, decision, tmp_path)
    assert (made.action, made.entry.filename) == (Action.SKIP, build(1))
    assert made.url == f"https://held.example/{build(1)}"


def test_without_digests_the_bytes_of_the_same_size_are_compared(tmp_path: Path) -> None:
    decision, data = conflict(tmp_path / "dist")
    same = with_build_tag(NAME, data, 2)[1]
    destination = Holding({NAME: b"old", build(1): b"other", build(2): same}, digests=False)
    made, _ = decided(destination, decision, tmp_path)
    assert (made.action, made.entry.filename) == (Action.SKIP, build(2))
    assert destination.asked[1] == {build(1), build(2)}  # asked again, with their sizes


@pytest.mark.parametrize("spelled", ["-5a-", "-05-"])
def test_a_build_held_under_another_spelling_is_gone_above(tmp_path: Path, spelled: str) -> None:
    decision, _ = conflict(tmp_path / "dist")
    other = build(5).replace("-5-", spelled).replace("k3_kernels", "K3_Kernels")
    made, _ = decided(Holding({NAME: b"old", other: b"older"}), decision, tmp_path)
    assert (made.action, made.entry.filename) == (Action.UPLOAD, build(6))


def test_a_build_past_the_last_number_held_stops_the_rebuild(tmp_path: Path) -> None:
    decision, _ = conflict(tmp_path / "dist")
    with pytest.raises(PublishError) as caught:
        decided(Holding({NAME: b"old", build(1000): b"older"}), decision, tmp_path)
    assert caught.value.exit_code == 5
    assert caught.value.hint == "release a new version"


def test_other_bytes_under_build_1_make_it_build_2(tmp_path: Path) -> None:
    decision, _ = conflict(tmp_path / "dist")
    made, _ = decided(Holding({NAME: b"old", build(1): b"other"}), decision, tmp_path)
    assert (made.action, made.entry.filename) == (Action.UPLOAD, build(2))


def test_the_build_tagged_wheel_is_refused_as_any_file_is(tmp_path: Path) -> None:
    decision, _ = conflict(tmp_path / "dist")
    destination = Holding({NAME: b"old"}, refused={build(1): "over the limit"})
    made, _ = decided(destination, decision, tmp_path)
    assert (made.action, made.rebuilt_from) == (Action.REFUSED, NAME)
    assert made.reason.startswith(f"as {build(1)}, over the limit (rebuilt:")


def test_an_immutable_release_keeps_its_conflict(tmp_path: Path) -> None:
    decision, _ = conflict(tmp_path / "dist")
    made, _ = decided(Holding({NAME: b"old"}, frozen="immutable"), decision, tmp_path)
    assert made == decision


def test_a_wheel_that_cannot_take_a_build_tag_stays_a_conflict_and_says_why(
    tmp_path: Path,
) -> None:
    decision, _ = conflict(tmp_path / "dist")
    wheel = tmp_path / "dist" / NAME
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("k3_kernels-0.1.0.dist-info/RECORD.jws", b"{}")
    made, _ = decided(Holding({NAME: b"old"}), decision, tmp_path)
    assert made.action is Action.CONFLICT
    assert made.rebuilt_from is None
    assert made.reason == (
        "exists; no build tag: its RECORD is signed: a new build tag would void the signature"
    )
