"""Files that are not wheels, fed to every command that takes a wheel or its name from
outside: `env --record`, a dist directory's manifest and wheels, GitHub release assets and
the release manifest among them. Each of a file that is no wheel, a wheel-named file that
is no zip, a zip with no .dist-info and a wheel whose version is not PEP 440 gets one line
naming the path (or asset) and why, the exit code of its kind, and no traceback; nothing is
provisioned or written for it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import zipfile
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.destinations.reach import Reach
from release.fsutil import sha256_file
from release.publish.run import PublishSettings, publish
from release.records.manifest import Manifest, write_manifest
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.github_standin import Release as StandInRelease
from tests.integration.wheels import (
    PROJECT,
    Release,
    entry_for,
    github_destination,
    make_release,
    make_wheel,
    pypi_destination,
)

ROOT = Path(__file__).resolve().parents[2]
RELEASE = Path(sys.executable).with_name("release")
CELL_WHEEL = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"  # matrix.yaml's 13.0-x86_64
BAD_VERSION = "k3_kernels-0.1.x-py3-none-manylinux_2_28_x86_64.whl"
INDEX_URL = "https://k3-org.github.io/k3-kernels/"
KINDS = ("no wheel", "no zip", "no dist-info", "bad version")


def junk(kind: str, directory: Path) -> Path:
    """A file of `kind` in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "no wheel":
        path = directory / "hostname"
        path.write_bytes(b"build-host\n")
    elif kind == "no zip":
        path = directory / CELL_WHEEL
        path.write_bytes(b"build-host\n")
    elif kind == "no dist-info":
        path = directory / CELL_WHEEL
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("k3_kernels/__init__.py", "")
    else:
        path = make_wheel(directory, version="0.1.x")  # a whole wheel, but for its version
    return path


def tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# --- release env --record, the console script as cibuildwheel runs it. ---

RECORD_HINT = "hint: give the .whl file the builder made, or the directory holding it"
RECORD_WHY = {
    "no wheel": "not a .whl file",
    "no zip": "not a zip archive",
    "no dist-info": "has 0 .dist-info directories, not 1",
    "bad version": "not a valid wheel filename (invalid version)",
}


def record(path: Path, dist: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RELEASE), "env", "--cuda", "13.0", "--arch", "x86_64", "--record", str(path),
         "--dist", str(dist), "--cache-dir", str(cache)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_env_record_of_what_is_not_a_wheel_is_one_line_and_leaves_dist_alone(
    tmp_path: Path, kind: str
) -> None:
    path = junk(kind, tmp_path / "built")
    dist = tmp_path / "out"
    dist.mkdir()
    (dist / "manifest.json").write_bytes(b'{"an earlier": "build"}\n')
    before = tree(dist)
    done = record(path, dist, tmp_path / "cache")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: --record {path}: {RECORD_WHY[kind]}", RECORD_HINT]
    assert done.stdout == ""
    assert tree(dist) == before
    assert not (tmp_path / "cache").exists(), "a toolchain was provisioned for a bad --record"


def test_env_record_of_a_directory_checks_the_wheel_it_finds(tmp_path: Path) -> None:
    built = tmp_path / "built"
    path = junk("no zip", built)
    done = record(built, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: --record {path}: not a zip archive", RECORD_HINT]
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache").exists()


def test_env_record_of_what_is_not_a_file_says_so(tmp_path: Path) -> None:
    fifo = tmp_path / CELL_WHEEL
    os.mkfifo(fifo)
    for path, why in ((fifo, "not a file"), (tmp_path / "gone.whl", "no such file or directory")):
        done = record(path, tmp_path / "out", tmp_path / "cache")
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[0] == f"error: --record {path}: {why}"
    assert not (tmp_path / "out").exists()


# --- A dist directory: its manifest's filenames and the wheels beside it. ---

DIST_COMMANDS = (["publish", "--dry-run"], ["verify"], ["pins"], ["plan"])


def dist_of(kind: str, dist: Path) -> None:
    """`dist` holding the file of `kind`, listed in its manifest as the cu13 wheel."""
    path = junk(kind, dist)
    entry = entry_for(make_wheel(dist.parent / "real"), pypi_destination("http://127.0.0.1:9/"))
    entry = replace(entry, filename=path.name, size=path.stat().st_size, sha256=sha256_file(path))
    manifest = Manifest(project=PROJECT, version="0.1.0", wheels=(entry,))
    write_manifest(manifest, dist / "manifest.json")


@pytest.mark.parametrize("command", DIST_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("kind", KINDS)
def test_a_dist_with_what_is_not_a_wheel_is_refused_in_one_line(
    tmp_path: Path, kind: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    dist = tmp_path / "dist"
    dist_of(kind, dist)
    before = tree(dist)
    assert main([*command, "--dist", str(dist)]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    name = {"no wheel": "hostname", "bad version": BAD_VERSION}.get(kind, CELL_WHEEL)
    if kind in ("no wheel", "bad version"):
        assert error == (
            f"error: {dist}/manifest.json: wheels[0].filename: {name!r} is not a wheel filename"
        )
    else:
        why = {
            "no zip": "not a readable zip file (File is not a zip file)",
            "no dist-info": "has 0 .dist-info directories, not 1",
        }[kind]
        assert error == f"error: {dist}: {name}: {why}"
    assert hint.startswith("hint: ")
    assert tree(dist) == before


# --- GitHub release assets: the index leaves out what pip could not install, and says so. ---


def published_once(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Release, Path, StandInRelease]:
    """A release published to the stand-in with its index in tmp_path/site."""
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    release = make_release(
        tmp_path / "dist", pypi=None, github=github_destination(github_standin.api_url)
    )
    site = tmp_path / "site"
    publish(
        PublishSettings(dist=release.dist, index_dir=site),
        Reach({"GITHUB_TOKEN": github_standin.token}, command="release publish"),
    )
    (published,) = github_standin.releases(DEFAULT_REPO)
    return release, site, published


def test_a_release_asset_named_like_a_wheel_that_is_not_one_is_left_out_of_the_index(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    release, site, published = published_once(github_standin, tmp_path, monkeypatch)
    stray = BAD_VERSION.replace("0.1.x", "0.1.x+cu129")
    github_standin.add_asset(
        published.id, stray, (tmp_path / "dist" / release.wheels[0].name).read_bytes()
    )
    github_standin.add_asset(published.id, "hostname", b"build-host\n")
    capsys.readouterr()

    assert main(["publish", "--dist", str(release.dist), "--index-dir", str(site)]) == 0
    out, err = capsys.readouterr()
    lines = (out + err).splitlines()
    assert (
        f"index: left out {DEFAULT_REPO}@v0.1.0 asset {stray}: not a valid wheel filename "
        "(invalid version)"
    ) in lines
    assert not any("hostname" in line for line in lines)  # a foreign file is no wheel: no word
    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [w.name for w in release.wheels]


def test_an_asset_name_with_line_breaks_is_shown_escaped_on_one_line(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A name the server gives cannot start a line of its own: a line `::error::...` would be
    a GitHub Actions workflow command."""
    release, site, published = published_once(github_standin, tmp_path, monkeypatch)
    github_standin.add_asset(published.id, "evil\n::error::forged line\nerror: x.whl", b"x")
    capsys.readouterr()

    assert main(["publish", "--dist", str(release.dist), "--index-dir", str(site)]) == 0
    out, err = capsys.readouterr()
    lines = (out + err).splitlines()
    assert (
        f"index: left out {DEFAULT_REPO}@v0.1.0 asset evil\\n::error::forged line\\nerror: x.whl: "
        "not a valid wheel filename (a space or a control character)"
    ) in lines
    assert not any(line.startswith(("::error::", "error: x")) for line in lines)


def published_on_github(gh: GitHubStandIn, tmp_path: Path) -> int:
    """A cu129 release published to the stand-in; its release id."""
    release = make_release(
        tmp_path / "dist", pypi=None, github=github_destination(gh.api_url, index_url=INDEX_URL)
    )
    publish(
        PublishSettings(dist=release.dist, index_dir=tmp_path / "site"),
        Reach({"GITHUB_TOKEN": gh.token}, command="release publish"),
    )
    (published,) = gh.releases(DEFAULT_REPO)
    return published.id


def tag_matrix(tmp_path: Path, gh: GitHubStandIn, pypi_index: str | None = None) -> Path:
    """A matrix whose cu129 cell went to the stand-in (and, with `pypi_index`, whose cu13
    cell went to that index), for `verify --tag`."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "k3-kernels"\nversion = "0.1.0"\n')
    pypi = (
        f"  pypi: {{kind: pypi, repository-url: '{pypi_index}', index-url: '{pypi_index}'}}\n"
        if pypi_index
        else ""
    )
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "project: project\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n"
        "  '12.9': {destination: github, local-label: cu129}\n"
        + ("  '13.0': {destination: pypi}\n" if pypi_index else "")
        + "destinations:\n"
        f"  github: {{kind: github, repository: {DEFAULT_REPO},"
        f" api-url: '{gh.api_url}', index-url: '{INDEX_URL}'}}\n" + pypi,
        encoding="utf-8",
    )
    return matrix


def test_a_release_manifest_served_with_other_bytes_fails_verify_tag_in_one_line(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Storage serves an unreadable release-manifest.json while the API lists the size and
    digest of the one uploaded: the download is refused for its bytes, before they are read."""
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    release_id = published_on_github(github_standin, tmp_path)
    manifest = next(
        a for a in github_standin.assets(release_id) if a.name == "release-manifest.json"
    )
    github_standin.state.corrupt_storage(manifest.id, b'{"wheels": [{"sha256": "00"}]}')
    matrix = tag_matrix(tmp_path, github_standin)
    capsys.readouterr()
    assert main(["verify", "--matrix", str(matrix), "--tag", "v0.1.0", "--no-pip"]) == 7
    error, hint = capsys.readouterr().err.splitlines()[-2:]
    assert error == (
        f"error: GitHub served other bytes for release-manifest.json ({len(manifest.data)} "
        f"bytes, digest {hashlib.sha256(manifest.data).hexdigest()[:12]} listed)"
    )
    assert hint == "hint: its storage serves what the API does not list: re-run, then re-upload it"


class _BrokenJsonPage(BaseHTTPRequestHandler):
    """A simple index that answers every project page with PEP 691 JSON that does not parse."""

    def do_GET(self) -> None:
        body = b'{"files": [}'
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_index_page_that_does_not_parse_fails_verify_tag_in_one_line(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    published_on_github(github_standin, tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenJsonPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/simple/"
        matrix = tag_matrix(tmp_path, github_standin, pypi_index=index)
        capsys.readouterr()
        assert main(["verify", "--matrix", str(matrix), "--tag", "v0.1.0", "--no-pip"]) == 7
    finally:
        server.shutdown()
        server.server_close()
    error, hint = capsys.readouterr().err.splitlines()[-2:]
    assert error.startswith(f"error: {index}k3-kernels/: unreadable index page: ")
    assert hint == "hint: check the index URL in matrix.yaml"
