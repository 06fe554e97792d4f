"""The pure parts of publishing: PyPI's refusal rules, credentials, the plan over destinations."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from release.credentials import index_credentials, mask
from release.destinations.decide import (
    Action,
    Companion,
    CompanionDecision,
    FileDecision,
    PublishPlan,
    RemoteFile,
    verdict,
)
from release.destinations.pypi_publisher import default_index_url, platform_allowed, pypi_refusals
from release.errors import ConfigError, ConflictError, PublishError
from release.publish.run import (
    DestinationPlan,
    blocked_error,
    frozen_error,
    next_version,
    plan_destination,
    select,
)
from release.records.dist import wheel_problem
from release.records.manifest import Manifest, WheelEntry
from release.wheelfile import read_wheel
from tests.integration.wheels import (
    entry_for,
    github_destination,
    make_wheel,
    pypi_destination,
)

PYPI = pypi_destination("http://127.0.0.1:1/")
LIMIT = 100 * 2**20


def refusals(wheel: Path, *, limit: int = LIMIT) -> list[str]:
    return pypi_refusals(wheel.name, read_wheel(wheel), max_file_size=limit)


def test_a_good_wheel_has_no_refusal(tmp_path: Path) -> None:
    assert refusals(make_wheel(tmp_path)) == []


def test_a_local_version_is_refused(tmp_path: Path) -> None:
    (reason,) = refusals(make_wheel(tmp_path, version="0.1.0+cu129"))
    assert "local version 0.1.0+cu129" in reason


@pytest.mark.parametrize("platform", ["linux_x86_64", "linux_aarch64"])
def test_a_plain_linux_tag_is_refused(tmp_path: Path, platform: str) -> None:
    (reason,) = refusals(make_wheel(tmp_path, platform=platform))
    assert f"platform tag {platform} is not on PyPI's allow-list" in reason


def test_a_file_over_the_limit_is_refused_and_the_limit_is_configurable(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, payload=b"x" * 4096)
    (reason,) = refusals(wheel, limit=1024)
    assert "over the 0 MiB file limit" in reason or "file limit" in reason
    assert refusals(wheel, limit=wheel.stat().st_size) == []


def test_metadata_version_differing_from_the_filename_is_refused(tmp_path: Path) -> None:
    (reason,) = refusals(make_wheel(tmp_path, metadata_version="0.1.1"))
    assert "METADATA Version '0.1.1' does not match the filename's 0.1.0" in reason


def test_metadata_name_differing_from_the_filename_is_refused(tmp_path: Path) -> None:
    (reason,) = refusals(make_wheel(tmp_path, name="other-kernels"))
    assert "METADATA Name 'other-kernels' does not match" in reason


def test_a_missing_record_is_refused(tmp_path: Path) -> None:
    assert refusals(make_wheel(tmp_path, record=False)) == ["no RECORD in the .dist-info"]


def test_not_a_zip_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"not a zip")
    (reason,) = refusals(wheel)
    assert "not a readable zip file" in reason


def test_every_reason_is_reported_together(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, version="0.1.0+cu129", platform="linux_x86_64", record=False)
    reasons = refusals(wheel)
    assert len(reasons) == 3


@pytest.mark.parametrize(
    ("platform", "allowed"),
    [
        ("manylinux_2_28_x86_64", True),
        ("manylinux_2_28_aarch64", True),
        ("manylinux2014_x86_64", True),
        ("musllinux_1_2_aarch64", True),
        ("any", True),
        ("win_amd64", True),
        ("macosx_11_0_arm64", True),
        ("linux_x86_64", False),
        ("linux_aarch64", False),
        ("manylinux_2_28_sparc", False),
    ],
)
def test_platform_allow_list(platform: str, allowed: bool) -> None:
    assert platform_allowed(platform) is allowed


def test_api_key_becomes_a_token_login() -> None:
    found = index_credentials(
        {"TWINE_API_KEY": "pypi-AgEIcHlwaS5vcmcabc"}, "https://upload.pypi.org/legacy/"
    )
    assert found is not None
    assert found.username == "__token__"
    assert found.password is not None
    assert found.password.reveal() == "pypi-AgEIcHlwaS5vcmcabc"
    assert "pypi-AgEI" not in repr(found)


def test_trusted_publishing_only_in_actions_without_a_password() -> None:
    actions = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x/token"}
    found = index_credentials(actions, "https://upload.pypi.org/legacy/")
    assert found is not None
    assert found.source == "trusted publishing"
    assert found.password is None
    assert index_credentials(actions, "http://127.0.0.1:8080/") is None
    assert index_credentials({}, "https://upload.pypi.org/legacy/") is None
    with_password = index_credentials(
        {**actions, "TWINE_PASSWORD": "pw-123456"}, "https://upload.pypi.org/legacy/"
    )
    assert with_password is not None
    assert with_password.source == "TWINE_USERNAME/TWINE_PASSWORD"


@pytest.mark.parametrize(
    ("repository", "index"),
    [
        ("https://upload.pypi.org/legacy/", "https://pypi.org/simple/"),
        ("https://test.pypi.org/legacy/", "https://test.pypi.org/simple/"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/simple/"),
        ("https://pypi.example.com/repo/legacy", "https://pypi.example.com/repo/simple/"),
    ],
)
def test_the_index_of_a_repository_url(repository: str, index: str) -> None:
    assert default_index_url(repository) == index


def test_mask_hides_secrets_and_url_credentials() -> None:
    text = "token ghp_SECRET123 at https://user:pw-123@host/simple/"
    assert mask(text, ["ghp_SECRET123"]) == "token *** at https://***@host/simple/"


class FakeDestination:
    """A destination that reports what a test says it holds (a collaborator of the seam
    under test, not of our own code)."""

    stages = False
    index_url = None
    taken = None

    def __init__(
        self,
        remote: Mapping[str, RemoteFile],
        refused: Mapping[str, str],
        frozen: str | None = None,
        held: int | None = 0,
    ) -> None:
        self.frozen = frozen
        self.name = "pypi"
        self.remote = remote
        self.refused = refused
        self.held = held

    def existing(self, files: Mapping[str, int], *, rehash: bool) -> Mapping[str, RemoteFile]:
        return self.remote

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        return self.refused.get(entry.filename)

    def held_files(self) -> Collection[str]:
        return list(self.remote)

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        return self.held

    def final_url(self, name: str) -> str:
        return f"https://files.example/{name}"

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        raise AssertionError("planning must not stage")

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        raise AssertionError("planning must not commit")


def test_the_plan_decides_each_file_and_refuses_a_tampered_one(tmp_path: Path) -> None:
    same = make_wheel(tmp_path, platform="manylinux_2_28_x86_64")
    other = make_wheel(tmp_path, platform="manylinux_2_28_aarch64")
    entries = [entry_for(same, PYPI), entry_for(other, PYPI)]
    remote = {
        same.name: RemoteFile(name=same.name, size=None, sha256=entries[0].sha256, url="u1"),
        other.name: RemoteFile(name=other.name, size=None, sha256="0" * 64, url="u2"),
    }
    plan = plan_destination(FakeDestination(remote, {}), entries, tmp_path, replace=True)
    actions = {d.entry.filename: d.action for d in plan.decisions}
    # PyPI never replaces: --replace still leaves other bytes a CONFLICT there
    assert actions == {same.name: Action.SKIP, other.name: Action.CONFLICT}

    other.write_bytes(other.read_bytes() + b"\0")
    plan = plan_destination(FakeDestination({}, {}), entries, tmp_path, replace=False)
    tampered = next(d for d in plan.decisions if d.entry.filename == other.name)
    assert tampered.action is Action.REFUSED
    assert "the manifest says" in tampered.reason


def test_a_missing_wheel_is_a_local_problem(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    entry = entry_for(wheel, PYPI)
    wheel.unlink()
    assert wheel_problem(entry, wheel) == f"{wheel} is missing (the manifest lists it)"


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_recorded_file_that_is_no_file_is_said_so(tmp_path: Path, kind: str) -> None:
    """It was "is 4096 bytes, the manifest says 292" for a directory, "is 0 bytes" for a
    FIFO, whose read would never end."""
    wheel = make_wheel(tmp_path)
    entry = entry_for(wheel, PYPI)
    wheel.unlink()
    wheel.mkdir() if kind == "directory" else os.mkfifo(wheel)
    assert wheel_problem(entry, wheel) == (
        f"{wheel} is not a file (a directory, a FIFO or a device): the manifest lists it"
    )


def test_blocked_plans_name_the_error_class(tmp_path: Path) -> None:
    entry = entry_for(make_wheel(tmp_path), PYPI)
    conflict = FileDecision(entry=entry, action=Action.CONFLICT, reason="r", url="u")
    refused = FileDecision(entry=entry, action=Action.REFUSED, reason="r", url="u")
    both = [DestinationPlan(destination=PYPI, plan=PublishPlan(decisions=(conflict, refused)))]
    only_refused = [DestinationPlan(destination=PYPI, plan=PublishPlan(decisions=(refused,)))]
    error = blocked_error(both)
    assert isinstance(error, ConflictError)
    assert error.message == "1 CONFLICT and 1 refused: nothing was uploaded"
    assert error.hint == "fix the refused files first (reasons above) and rebuild"
    plain = blocked_error(only_refused)
    assert type(plain) is PublishError


def test_only_selects_by_kind_or_name_and_rejects_unknown(tmp_path: Path) -> None:
    cu13 = entry_for(make_wheel(tmp_path), PYPI)
    cu129 = entry_for(make_wheel(tmp_path, version="0.1.0+cu129"), github_destination("http://x"))
    manifest = Manifest(project="k3-kernels", version="0.1.0", wheels=(cu13, cu129))
    assert list(select(manifest, ())) == ["github", "pypi"]
    assert list(select(manifest, ("pypi",))) == ["pypi"]
    assert list(select(manifest, ("github",))) == ["github"]
    with pytest.raises(ConfigError, match="--only gitlab"):
        select(manifest, ("gitlab",))


FROZEN = "the release k3-org/k3-kernels@v0.1.0 is immutable"


def test_an_immutable_destination_takes_nothing_new_nor_other_bytes() -> None:
    held = RemoteFile(name="w", size=3, sha256="a" * 64, url="u")
    leftover = RemoteFile(name="w", size=0, sha256=None, url="u", state="starter")
    same = verdict("a" * 64, 3, held, refusal=None, replace=True, url="new", frozen=FROZEN)
    assert same == (Action.SKIP, f"same sha256 ({FROZEN})", "u")
    other = verdict("b" * 64, 3, held, refusal=None, replace=True, url="new", frozen=FROZEN)
    assert other[0] is Action.CONFLICT
    assert other[1].endswith(f"; {FROZEN}: it cannot be replaced")
    for remote in (None, leftover):
        action, reason, url = verdict(
            "b" * 64, 3, remote, refusal=None, replace=True, url="new", frozen=FROZEN
        )
        assert action is Action.REFUSED
        assert reason.endswith(f"but {FROZEN}: nothing can be added")
        assert url == "new"
    assert verdict("b" * 64, 3, None, refusal=None, replace=True, url="new")[0] is Action.UPLOAD


def test_a_listed_sha256_that_is_none_is_said_so_not_shown_as_other_bytes() -> None:
    listed = RemoteFile(name="w", size=3, sha256="not-a-digest\n" * 9, url="u")
    action, reason, _ = verdict("b" * 64, 3, listed, refusal=None, replace=False, url="new")
    assert action is Action.CONFLICT  # the name is taken, whatever its bytes
    assert reason == "exists, and the destination lists 'not-a-digest\\nnot', which is no sha256"


def test_replace_on_an_immutable_release_names_it_and_a_new_version(tmp_path: Path) -> None:
    entries = [entry_for(make_wheel(tmp_path), github_destination("http://x"))]
    remote = {entries[0].filename: RemoteFile(name="w", size=None, sha256="0" * 64, url="u")}
    destination = FakeDestination(remote, {}, frozen=FROZEN)
    plan = plan_destination(destination, entries, tmp_path, replace=True)
    assert plan.frozen == FROZEN
    assert plan.blocked
    plans = [DestinationPlan(destination=entries[0].destination, plan=plan)]
    error = frozen_error(plans, "0.1.0", replace=True)
    assert isinstance(error, ConflictError)
    assert error.message.startswith(f"{FROZEN}: GitHub refuses any change to its assets, --")
    assert entries[0].filename in error.message
    assert error.hint == (
        "immutable releases can't change: release a new version, such as 0.1.0.post1"
    )


@pytest.mark.parametrize(
    ("version", "after"),
    [("0.1.0", "0.1.0.post1"), ("0.1.0.post1", "0.1.0.post2"), ("1.0rc1", "1.0rc1.post1")],
)
def test_the_version_after_a_frozen_one_is_its_next_post_release(version: str, after: str) -> None:
    assert next_version(version) == after


def test_a_conflict_of_wheels_alone_names_build_tag_and_what_it_cannot_rename(
    tmp_path: Path,
) -> None:
    entry = entry_for(make_wheel(tmp_path), PYPI)
    wheel = FileDecision(entry=entry, action=Action.CONFLICT, reason="r", url="u")

    def plans(*companions: Companion) -> list[DestinationPlan]:
        decided = tuple(
            CompanionDecision(companion=c, action=Action.CONFLICT, reason="r", url="u")
            for c in companions
        )
        plan = PublishPlan(decisions=(wheel,), companions=decided)
        return [DestinationPlan(destination=PYPI, plan=plan)]

    record = Companion(filename="release-manifest.json", data=b"{}", sha256="0" * 64,
                       of="release", purpose="manifest", record=True)  # fmt: skip
    nccl = Companion(filename="cu12.txt", data=b"x", sha256="1" * 64, of="release",
                     purpose="NCCL pin")  # fmt: skip
    # the release manifest differs because the wheels do: --build-tag writes it again
    for blocked in (plans(), plans(record)):
        assert str(blocked_error(blocked).hint).startswith(
            "a destination holds other bytes under these wheels' names: pass --build-tag to "
            "publish each rebuilt wheel as the next build of its name (NAME-1-...whl)"
        )
    assert "--build-tag" not in str(blocked_error(plans(nccl)).hint)
    assert blocked_error(plans(nccl), build_tag=True).hint == (
        f"--build-tag gives rebuilt wheels a new name; cu12.txt, {entry.filename} cannot take "
        "one (reasons above): bump the version"
    )
