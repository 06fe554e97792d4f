"""A dist directory as anyone may hand it on (issue 49): records nested 200,000 deep, and a
recorded sdist that is broken, another project's, reaching out of its directory, bound for a
destination none of the wheels go to, or left out of the publish record. Each ends `plan`,
`publish`, `verify` and `pins` with one error line per problem and its exit code, never a
traceback; nothing is uploaded; `verify` fails (exit 7) what was never published, and checks
the published sdist as build checked it (release.records.sdistfile)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.records.manifest import Manifest, write_manifest
from release.records.release_manifest import release_manifest_bytes
from release.verify.checks import UNLISTED
from tests.integration.wheels import (
    MODULE,
    PROJECT,
    Release,
    make_release,
    pypi_destination,
    with_sdist,
)
from tests.pypi_server import PypiServer

ROOT = Path(__file__).resolve().parents[2]
SDIST = f"{MODULE}-0.1.0.tar.gz"
BASE = f"{MODULE}-0.1.0"
PKG_INFO = f"Metadata-Version: 2.4\nName: {PROJECT}\nVersion: 0.1.0\n".encode()
NOWHERE = "http://127.0.0.1:9/"  # nothing listens: a command that asks fails differently
DIST_COMMANDS = {
    "plan": ["plan", "--matrix", str(ROOT / "matrix.yaml")],
    "publish": ["publish", "--dry-run"],
    "verify": ["verify", "--no-pip", "--no-provenance"],
    "pins": ["pins"],
}
DEEP = b'{"a":' * 200_000 + b"1" + b"}" * 200_000


def run(command: str, dist: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """The exit code and the stderr lines of `release COMMAND --dist DIST`; no traceback in
    either. plan is given the previous release's manifest: it asks GitHub for none."""
    argv = [*DIST_COMMANDS[command], "--dist", str(dist)]
    if command == "plan":
        previous = dist.parent / "previous-release-manifest.json"
        earlier = Manifest(project=PROJECT, version="0.0.1", wheels=())
        previous.write_bytes(release_manifest_bytes(earlier))
        argv += ["--previous-manifest", str(previous)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err.splitlines()


def released(dist: Path, url: str = NOWHERE) -> Release:
    pypi = pypi_destination(url)
    return with_sdist(make_release(dist, pypi=pypi), pypi)


# --- F24: manifest.json and published.json nested 200,000 deep. ---


@pytest.mark.parametrize("command", DIST_COMMANDS, ids=str)
def test_a_manifest_nested_200000_deep_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "manifest.json").write_bytes(DEEP)
    code, err = run(command, dist, capsys)
    assert code == 2
    assert err[0] == (
        f"error: {dist}/manifest.json: not a readable manifest: nested too deep: more than "
        "64 levels"
    )


@pytest.mark.parametrize("command", ["verify", "pins"])
def test_a_publish_record_nested_200000_deep_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = make_release(tmp_path / "dist", pypi=pypi_destination(NOWHERE))
    (release.dist / "published.json").write_bytes(DEEP)
    code, err = run(command, release.dist, capsys)
    assert code == 2
    assert err[0] == (
        f"error: {release.dist}/published.json: not a readable publish record: nested too "
        "deep: more than 64 levels"
    )


# --- F6, F8: a recorded sdist that is no sdist of the release. ---


def tar_gz(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


OTHER = b"Metadata-Version: 2.4\nName: requests\nVersion: 9.9\n"
BROKEN: dict[str, tuple[bytes, str]] = {
    "not-gzip": (b"k3 kernels source\n", "not a gzip'd tar archive (not a gzip file)"),
    "no-pkg-info": (
        tar_gz({f"{BASE}/pyproject.toml": b"[project]\n"}),
        f"no {BASE}/PKG-INFO (PEP 625: one top directory {BASE}/)",
    ),
    "absolute-and-relative": (
        tar_gz({f"{BASE}/PKG-INFO": PKG_INFO, "/etc/cron.d/k3": b"* * * * * root sh\n"}),
        f"member '/etc/cron.d/k3' is outside {BASE}/",
    ),
    "traversal": (
        tar_gz({f"{BASE}/PKG-INFO": PKG_INFO, f"{BASE}/../../x": b"x"}),
        f"member '{BASE}/../../x' is outside {BASE}/",
    ),
    "another-project": (
        tar_gz({f"{BASE}/PKG-INFO": OTHER}),
        f"PKG-INFO Name is 'requests', the release's is {PROJECT}",
    ),
    "no-metadata-version": (
        tar_gz({f"{BASE}/PKG-INFO": PKG_INFO.replace(b"Metadata-Version: 2.4\n", b"")}),
        "PKG-INFO has no Metadata-Version",
    ),
}


def recorded_as_built(release: Release, data: bytes) -> None:
    """`data` as the release's sdist, its size and sha256 in the manifest (as a build that
    made it would have recorded them)."""
    (release.dist / SDIST).write_bytes(data)
    assert release.manifest.sdist is not None
    sdist = replace(release.manifest.sdist, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    write_manifest(replace(release.manifest, sdist=sdist), release.dist / "manifest.json")


@pytest.mark.parametrize("command", DIST_COMMANDS, ids=str)
@pytest.mark.parametrize("kind", BROKEN)
def test_a_recorded_sdist_that_is_not_the_releases_is_refused_in_one_line(
    kind: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = released(tmp_path / "dist")
    data, why = BROKEN[kind]
    recorded_as_built(release, data)
    code, err = run(command, release.dist, capsys)
    assert code == 2
    assert err[0] == f"error: {release.dist}: {SDIST}: {why}"


@pytest.mark.parametrize("kind", ["another-project", "traversal"])
def test_a_recorded_sdist_that_is_not_the_releases_is_not_uploaded(
    kind: str, pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    release = released(tmp_path / "dist", pypiserver.url)
    recorded_as_built(release, BROKEN[kind][0])
    assert main(["publish", "--dist", str(release.dist)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: {release.dist}: {SDIST}: {BROKEN[kind][1]}"
    assert pypiserver.files() == {}


def test_an_sdist_twine_cannot_read_is_refused_not_a_traceback(
    pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Its PKG-INFO names the release, but makes its name dynamic, which core metadata
    forbids: twine raises, and the plan of publish says so as the sdist's refusal."""
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    release = released(tmp_path / "dist", pypiserver.url)
    recorded_as_built(release, tar_gz({f"{BASE}/PKG-INFO": PKG_INFO + b"Dynamic: Name\n"}))
    code = main(["publish", "--dry-run", "--dist", str(release.dist), "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 5, err
    (row,) = [c for c in json.loads(out)["companions"] if c["filename"] == SDIST]
    assert row["action"] == "refused"
    assert row["reason"].startswith(
        "twine check: No PKG-INFO in archive or PKG-INFO missing 'Metadata-Version'"
    )
    assert pypiserver.files() == {}


# --- F7: an sdist bound for a destination no wheel goes to. ---


@pytest.mark.parametrize("command", DIST_COMMANDS, ids=str)
def test_an_sdist_bound_where_no_wheel_goes_is_refused_naming_the_destination(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = make_release(tmp_path / "dist", pypi=pypi_destination(NOWHERE))
    with_sdist(release, replace(pypi_destination(NOWHERE), name="testpypi"))
    code, err = run(command, release.dist, capsys)
    assert code == 2
    assert err[0] == (
        f"error: {release.dist}: manifest.json: the sdist {SDIST} goes to 'testpypi', where "
        "none of the release's wheels go (publish sends it with them)"
    )


# --- F9, and the published sdist checked as build checked it. ---


def published(pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Release:
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    release = released(tmp_path / "dist", pypiserver.url)
    assert main(["publish", "--dist", str(release.dist)]) == 0
    return release


def verified(release: Release, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """verify's exit code and the sdist's download check (ok, detail)."""
    capsys.readouterr()
    code = main(["verify", "--dist", str(release.dist), "--no-pip", "--no-provenance", "--json"])
    report = json.loads(capsys.readouterr().out)
    (check,) = [c for c in report["checks"] if (c["subject"], c["check"]) == (SDIST, "download")]
    return code, check


def test_a_record_that_lacks_the_recorded_sdist_fails_verify(
    pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    release = published(pypiserver, tmp_path, monkeypatch)
    record_path = release.dist / "published.json"
    record = json.loads(record_path.read_text())
    record["companions"] = [c for c in record["companions"] if c["filename"] != SDIST]
    record_path.write_text(json.dumps(record))
    code, check = verified(release, capsys)
    assert code == 7
    assert (check["ok"], check["detail"]) == (False, UNLISTED)


def test_a_published_sdist_that_is_not_the_releases_fails_verify(
    pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The verify job holds the manifest and the record, not the sdist: the bytes served
    match what they record, and are still checked as an sdist of the release."""
    release = published(pypiserver, tmp_path, monkeypatch)
    code, check = verified(release, capsys)
    assert (code, check["ok"]) == (0, True)  # as published: the release's own sdist
    data = BROKEN["another-project"][0]
    (pypiserver.packages / SDIST).write_bytes(data)
    recorded_as_built(release, data)
    record_path = release.dist / "published.json"
    record = json.loads(record_path.read_text())
    for companion in record["companions"]:
        if companion["filename"] == SDIST:
            companion.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    record_path.write_text(json.dumps(record))
    (release.dist / SDIST).unlink()
    code, check = verified(release, capsys)
    assert code == 7
    assert (check["ok"], check["detail"]) == (
        False,
        f"not the release's sdist: {SDIST}: PKG-INFO Name is 'requests', the release's is "
        f"{PROJECT}",
    )
