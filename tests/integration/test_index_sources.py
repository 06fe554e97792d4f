"""What the regenerated index takes from the other releases of the repository, against the
stand-in GitHub: the index lists every published release's wheels, one file per name, so a
name another release holds with other bytes is refused before any upload (and stops the
index where two releases already hold it), never listed in place of the release's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.github_standin import Release as StandInRelease
from tests.integration.wheels import Release, github_destination, make_release, make_wheel

CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def other_release(gh: GitHubStandIn, tag: str) -> StandInRelease:
    """A published release `tag` of the repository, made by someone else."""
    state = gh.state
    owner, name = DEFAULT_REPO.split("/")
    bot = state.user("someone")
    return state.create_release(state.repo(owner, name, bot, ""), bot, {"tag_name": tag})


def wheel_bytes(tmp_path: Path, version: str, payload: bytes) -> bytes:
    directory = tmp_path / f"w-{version}-{len(payload)}"
    return make_wheel(directory, version=version, payload=payload).read_bytes()


@pytest.fixture
def ours(github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Release:
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    destination = github_destination(github_standin.api_url)
    return make_release(tmp_path / "dist", pypi=None, github=destination)


def published(gh: GitHubStandIn) -> dict[str, list[str]]:
    return {r.tag_name: sorted(a.name for a in gh.assets(r.id)) for r in gh.releases(DEFAULT_REPO)}


def test_a_wheel_an_older_release_holds_other_bytes_of_is_refused_before_any_upload(
    github_standin: GitHubStandIn,
    ours: Release,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    older = other_release(github_standin, "v0.0.9")
    github_standin.add_asset(older.id, CU129, wheel_bytes(tmp_path, "0.1.0+cu129", b"#foreign\n"))
    site = tmp_path / "site"
    capsys.readouterr()

    report = tmp_path / "report.json"
    args = ["publish", "--dist", str(ours.dist), "--index-dir", str(site)]
    assert main([*args, "--json-file", str(report)]) == 5
    assert "error: 1 refused: nothing was uploaded" in capsys.readouterr().err
    (wheel,) = [d for d in json.loads(report.read_text())["plan"] if d["filename"] == CU129]
    download = f"{github_standin.web_url}/{DEFAULT_REPO}/releases/download"
    assert wheel["action"] == "refused"
    assert wheel["reason"] == (
        f"{DEFAULT_REPO} already holds other bytes under this name, or one pip takes for it: "
        f"{download}/v0.0.9/{CU129}, which the index would list beside this one "
        f"({download}/v0.1.0/{CU129}): delete or rename that asset, or release a new version"
    )
    assert published(github_standin) == {"v0.0.9": [CU129]}
    assert not site.exists()


@pytest.mark.parametrize(
    "spelling",
    [
        CU129.replace("0.1.0+", "0.1.0.0+"),  # the same version to pip
        CU129.replace("k3_kernels", "K3_Kernels"),
        CU129.replace("+cu129-", "+cu129-5-"),  # a build pip ranks above ours
        CU129.replace("manylinux_2_28_x86_64", "manylinux_2_28_x86_64.manylinux2014_x86_64"),
    ],
    ids=["0.1.0.0", "K3_Kernels", "build-5", "compressed-tags"],
)
def test_a_name_pip_takes_for_the_wheel_held_with_other_bytes_is_refused(
    github_standin: GitHubStandIn, ours: Release, tmp_path: Path, spelling: str
) -> None:
    """pip installs any spelling of the same wheel, the highest build first: with exit 0,
    the index listed both, and pip installed the other bytes."""
    tag = "v0.0.9"
    held = other_release(github_standin, tag)
    github_standin.add_asset(held.id, spelling, wheel_bytes(tmp_path, "0.1.0+cu129", b"#x\n"))
    report = tmp_path / "report.json"
    args = ["publish", "--dist", str(ours.dist), "--json-file", str(report)]
    assert main(args) == 5
    (wheel,) = [d for d in json.loads(report.read_text())["plan"] if d["filename"] == CU129]
    assert wheel["action"] == "refused"
    assert f"/{tag}/{spelling}, which the index would list beside this one" in wheel["reason"]
    assert published(github_standin) == {tag: [spelling]}


def test_the_same_bytes_in_two_releases_are_listed_once(
    github_standin: GitHubStandIn, ours: Release, tmp_path: Path
) -> None:
    older = other_release(github_standin, "v0.0.9")
    github_standin.add_asset(older.id, CU129, (ours.dist / CU129).read_bytes())
    site = tmp_path / "site"

    assert main(["publish", "--dist", str(ours.dist), "--index-dir", str(site)]) == 0
    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [CU129]


def test_a_name_two_releases_hold_with_other_bytes_stops_the_index(
    github_standin: GitHubStandIn,
    ours: Release,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two older releases that hold one name with other bytes: the index cannot list
    either truthfully, and is not written (exit 5), naming both."""
    old = CU129.replace("0.1.0", "0.0.8")
    urls = []
    for tag, payload in (("v0.0.8", b"#one\n"), ("v0.0.9", b"#two\n")):
        release = other_release(github_standin, tag)
        github_standin.add_asset(release.id, old, wheel_bytes(tmp_path, "0.0.8+cu129", payload))
        urls.append(f"{github_standin.web_url}/{DEFAULT_REPO}/releases/download/{tag}/{old}")
    site = tmp_path / "site"
    capsys.readouterr()

    assert main(["publish", "--dist", str(ours.dist), "--index-dir", str(site)]) == 5
    (error,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert error.startswith(f"error: cannot build the index: {old}: listed twice with different")
    assert all(url in error for url in urls)
    assert not site.exists()


def test_a_sidecar_that_is_not_its_wheels_metadata_is_not_vouched_for(
    github_standin: GitHubStandIn,
    ours: Release,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An older release's `.metadata` that adds a requirement its wheel does not have: pip
    would resolve from it, so the index gives no PEP 658 hash for that wheel, and says so."""
    older = other_release(github_standin, "v0.0.9")
    old = CU129.replace("0.1.0", "0.0.9")
    github_standin.add_asset(older.id, old, wheel_bytes(tmp_path, "0.0.9+cu129", b""))
    forged = b"Metadata-Version: 2.1\nName: k3-kernels\nVersion: 0.0.9+cu129\nRequires-Dist: evil\n"
    github_standin.add_asset(older.id, old + ".metadata", forged)
    site = tmp_path / "site"
    capsys.readouterr()

    assert main(["publish", "--dist", str(ours.dist), "--index-dir", str(site)]) == 0
    out, err = capsys.readouterr()
    assert (
        f"index: left out the PEP 658 metadata of {DEFAULT_REPO}@v0.0.9 asset {old}: it is not "
        "the wheel's own METADATA (pip would resolve from it)"
    ) in (out + err).splitlines()
    page = site / "cu129" / "k3-kernels"
    listed = {f["filename"]: f for f in json.loads((page / "index.json").read_text())["files"]}
    assert listed[old]["core-metadata"] is False
    assert isinstance(listed[CU129]["core-metadata"], dict)  # its own sidecar is vouched for
    html = (page / "index.html").read_text()
    (line,) = [line for line in html.splitlines() if f">{old}<" in line]
    assert "data-core-metadata" not in line


def test_a_sidecar_whose_wheel_storage_takes_no_ranges_is_checked_from_the_whole_wheel(
    github_standin: GitHubStandIn, ours: Release, tmp_path: Path
) -> None:
    """Where the wheel's METADATA could not be read by range, the index lost its PEP 658
    attribute and its Requires-Python; the whole wheel is read instead."""
    assert main(["publish", "--dist", str(ours.dist), "--index-dir", str(tmp_path / "a")]) == 0
    github_standin.ranges = False
    assert main(["publish", "--dist", str(ours.dist), "--index-dir", str(tmp_path / "b")]) == 0
    pages = [
        json.loads((tmp_path / site / "cu129" / "k3-kernels" / "index.json").read_text())
        for site in ("a", "b")
    ]
    assert pages[1] == pages[0]
    (listed,) = [f for f in pages[1]["files"] if f["filename"] == CU129]
    assert listed["requires-python"] == ">=3.9"
    assert "core-metadata" in listed
