"""The full tier's part of tests/integration/test_releases.py (its docstring says what both
parts check).

Releases over time and their consumers, against pypiserver and the stand-in GitHub:
several versions in one index (PEP 658 metadata for every file), read by pip and uv as a
static host serves it (HTML) and as a host that routes by Accept serves it (PEP 691 JSON),
the order that keeps everything private until every destination holds its files,
`--replace` without a missing URL, and bytes that rot under a correct digest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from release.cli import main
from release.credentials import IndexCredentials
from release.destinations.base import Publisher
from release.destinations.pypi_publisher import PypiPublisher, UploadAnswer, twine_upload
from release.destinations.reach import Reach
from release.errors import PublishError
from release.publish.run import PublishSettings, default_factory, publish
from release.records.manifest import DestinationRef
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.indexes import Served, static_server
from tests.integration.test_publish_e2e import serve
from tests.integration.test_releases import (
    BIN,
    VERSIONS,
    github_release,
    watch_matrix,
    web_requests,
    wheel_sha,
    with_nccl,
)
from tests.integration.wheels import (
    PROJECT,
    github_destination,
    make_release,
    pypi_destination,
    with_sdist,
)
from tests.local_http import LOCAL
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow


def test_three_releases_share_one_index_and_resolve_through_their_metadata(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    env = {"GITHUB_TOKEN": github_standin.token}
    site = tmp_path / "site"
    for version in VERSIONS:
        release = with_nccl(github_release(tmp_path, github_standin, version))
        publish(
            PublishSettings(dist=release.dist, index_dir=site),
            Reach(env, command="release publish"),
        )

    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    files = {f["filename"]: f for f in page["files"]}
    assert len(files) == 3
    for version, requires in VERSIONS.items():
        name = f"k3_kernels-{version}+cu129-py3-none-manylinux_2_28_x86_64.whl"
        assert files[name]["requires-python"] == requires
        assert files[name]["core-metadata"] != False  # noqa: E712  # a dict when hosted
    html = (site / "cu129" / "k3-kernels" / "index.html").read_text()
    assert html.count("data-core-metadata=") == 3
    assert html.count('data-requires-python="&gt;=3.1') == 2
    assert (site / "nccl" / "cu12.txt").read_text().endswith("nvidia-nccl-cu12==2.30.7\n")

    github_standin.clear_log()
    with serve(site) as base:
        index = f"{base}cu129/"
        for version in VERSIONS:
            report = tmp_path / f"report-{version}.json"
            done = subprocess.run(
                [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run",
                 "--ignore-installed", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
                 "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                 "--target", str(tmp_path / "t"), "--report", str(report),
                 "--index-url", index, f"{PROJECT}=={version}+cu129"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            picked = unquote(json.loads(report.read_text())["install"][0]["download_info"]["url"])
            assert picked.endswith(
                f"/k3_kernels-{version}+cu129-py3-none-manylinux_2_28_x86_64.whl"
            )
        pip_requests = web_requests(github_standin)
        github_standin.clear_log()
        for version in VERSIONS:
            done = subprocess.run(
                [str(BIN / "uv"), "pip", "compile", "-", "--index-url", index, "--no-header",
                 "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28",
                 "--quiet"],
                input=f"{PROJECT}=={version}+cu129\n", capture_output=True, text=True,
                check=False, env={"PATH": str(BIN), "UV_NO_CACHE": "1", "HOME": str(tmp_path)},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert f"{PROJECT}=={version}+cu129" in done.stdout
        uv_requests = web_requests(github_standin)
    for requests in (pip_requests, uv_requests):
        assert requests, "the resolver fetched nothing from the release"
        assert all(path.endswith(".whl.metadata") for path in requests), requests


def test_pypi_down_after_the_draft_leaves_nothing_public_and_a_rerun_publishes(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = make_release(
        tmp_path / "dist",
        pypi=pypi_destination(pypiserver.url),
        github=github_destination(github_standin.api_url),
    )
    env = {**pypiserver.env(), "GITHUB_TOKEN": github_standin.token}
    settings = PublishSettings(dist=release.dist, index_dir=tmp_path / "site")
    pypi_uploads: list[str] = []

    def pypi_goes_down(wheel: Path, repository_url: str, creds: IndexCredentials) -> UploadAnswer:
        pypi_uploads.append(wheel.name)
        pypiserver.stop()  # after the plan and the GitHub draft, before PyPI has anything
        return twine_upload(wheel, repository_url, creds)

    reach = Reach(env, command="release publish")

    def factory(destination: DestinationRef) -> Publisher:
        if destination.kind == "pypi":
            return PypiPublisher(destination, reach=reach, uploader=pypi_goes_down)
        return default_factory(reach)(destination)

    with pytest.raises(PublishError):
        publish(settings, reach, factory=factory)
    assert pypi_uploads, "PyPI was never asked"
    (draft,) = github_standin.releases(DEFAULT_REPO)
    assert draft.draft, "the GitHub release went public while PyPI was missing its files"
    names = {a.name for a in github_standin.assets(draft.id)}
    assert {w.name for w in release.wheels if "+cu129" in w.name} <= names

    pypiserver.start()
    publish(settings, Reach(env, command="release publish"))
    (public,) = github_standin.releases(DEFAULT_REPO)
    assert not public.draft
    assert public.id == draft.id
    assert set(pypiserver.files()) == {w.name for w in release.wheels if "+" not in w.name}


def test_the_url_watch_verifies_a_tag_with_no_dist_and_names_what_stopped_resolving(
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    release = with_nccl(
        make_release(
            tmp_path / "dist",
            pypi=pypi_destination(pypiserver.url),
            github=github_destination(github_standin.api_url),
        )
    )
    release = with_sdist(release, pypi_destination(pypiserver.url))
    sdist = "k3_kernels-0.1.0.tar.gz"
    env = {**pypiserver.env(), "GITHUB_TOKEN": github_standin.token}
    site = tmp_path / "site"
    publish(
        PublishSettings(dist=release.dist, index_dir=site), Reach(env, command="release publish")
    )
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    matrix = watch_matrix(tmp_path, pypiserver, github_standin)
    shutil.rmtree(release.dist)  # the watch has nothing but the matrix and the destinations
    with serve(site) as base:
        args = ["verify", "--matrix", str(matrix), "--latest", "1", "--index-base-url", base,
                "--no-pip", "--json-file", str(tmp_path / "v.json")]  # fmt: skip
        assert main(args) == 0, capsys.readouterr().err
        checks = json.loads((tmp_path / "v.json").read_text())["checks"]
        downloads = {c["subject"] for c in checks if c["check"] == "download"}
        assert {w.name for w in release.wheels} <= downloads
        assert "release-manifest.json" in downloads
        assert {"listing", "index", "metadata"} <= {c["check"] for c in checks}
        # the sdist as PyPI lists it (release-manifest.json does not record it), and its
        # provenance read as a PyPI file's (none here, and none required)
        mine = {(c["check"], c["ok"]) for c in checks if c["subject"] == sdist}
        assert mine == {("download", True), ("listing", True), ("provenance", True)}

        (published,) = github_standin.releases(DEFAULT_REPO)
        victim = next(a for a in github_standin.assets(published.id) if "+cu129" in a.name)
        github_standin.state.corrupt_storage(victim.id, b"rotten" * 10)
        capsys.readouterr()
        assert main([*args[:3], "--tag", "v0.1.0", *args[5:]]) == 7
    report = summary.read_text()
    assert victim.name in report
    assert f"/releases/download/v0.1.0/{victim.name}" in report


def test_pins_install_with_pip_and_uv_and_by_url(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = make_release(
        tmp_path / "dist",
        pypi=pypi_destination(pypiserver.url),
        github=github_destination(github_standin.api_url),
        arches=("x86_64", "aarch64"),
    )
    env = {**pypiserver.env(), "GITHUB_TOKEN": github_standin.token}
    site = tmp_path / "site"
    publish(
        PublishSettings(dist=release.dist, index_dir=site), Reach(env, command="release publish")
    )
    # a private index's credentials stay out of the pins (files shared with users and
    # images): pip reads them from a netrc where it installs, as on a user's machine
    netrc = tmp_path / "netrc"
    netrc.write_text(
        f"machine 127.0.0.1 login {pypiserver.username} password {pypiserver.password}\n"
    )
    with serve(site) as base:
        out = tmp_path / "pins"
        overrides = [
            "--index-url",
            f"cu129={base}cu129/",
            "--index-url",
            f"pypi={pypiserver.index_url}",
        ]
        assert main(["pins", "--dist", str(release.dist), "--out", str(out), *overrides]) == 0
        assert sorted(p.name for p in out.iterdir()) == [
            "cu129-urls.txt", "cu129.txt", "default-urls.txt", "default.txt",
        ]  # fmt: skip
        pinned = (out / "cu129.txt").read_text()
        for wheel in (w for w in release.wheels if "+cu129" in w.name):
            assert f"--hash=sha256:{wheel_sha(wheel)}" in pinned

        def pip(requirements: Path, target: Path, **env: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "--isolated", "install", "--no-cache-dir",
                 "--no-deps", "--target", str(target), "-r", str(requirements)],
                capture_output=True, text=True, check=False, env={**os.environ, **env},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            (dist_info,) = target.glob("k3_kernels-*.dist-info")
            return dist_info.name

        assert pip(out / "cu129.txt", tmp_path / "a") == "k3_kernels-0.1.0+cu129.dist-info"
        assert pip(out / "cu129-urls.txt", tmp_path / "b") == "k3_kernels-0.1.0+cu129.dist-info"
        logged_in = {"NETRC": str(netrc)}  # for PyPI's wheels alone: the stand-ins share its host
        assert pip(out / "default.txt", tmp_path / "c", **logged_in) == "k3_kernels-0.1.0.dist-info"
        done = subprocess.run(
            [str(BIN / "uv"), "pip", "install", "--no-deps", "--target", str(tmp_path / "d"),
             "-r", str(out / "cu129.txt")],
            capture_output=True, text=True, check=False,
            env={"PATH": str(BIN), "UV_NO_CACHE": "1", "HOME": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [p.name for p in (tmp_path / "d").glob("k3_kernels-*.dist-info")] == [
            "k3_kernels-0.1.0+cu129.dist-info"
        ]
        x86 = next(w for w in release.wheels if "+cu129" in w.name and "x86_64" in w.name)
        (out / "bad.txt").write_text(pinned.replace(wheel_sha(x86), "0" * 64))
        refused = subprocess.run(
            [sys.executable, "-m", "pip", "--isolated", "install", "--no-cache-dir", "--no-deps",
             "--target", str(tmp_path / "e"), "-r", str(out / "bad.txt")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    assert refused.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr


def test_a_host_that_routes_by_accept_serves_pep_691_json_which_pip_and_uv_read(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    """The same tree, served by a host that answers a project's URL with `index.json` when
    the request asks for PEP 691 JSON (what docs/publish.md's nginx map does): pip and uv
    both ask for it first, read it, and take each wheel's METADATA from its PEP 658 sidecar
    (the JSON's `core-metadata`) instead of the wheel. A request for HTML gets the HTML."""
    env = {"GITHUB_TOKEN": github_standin.token}
    site = tmp_path / "site"
    release = github_release(tmp_path, github_standin, "0.1.0")
    publish(PublishSettings(dist=release.dist, index_dir=site), Reach(env, command="publish"))
    served: list[Served] = []
    github_standin.clear_log()
    with static_server(site, served=served) as base:
        index = f"{base}cu129/"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check",
             "install", "--dry-run", "--ignore-installed", "--no-deps", "--no-cache-dir",
             "--only-binary=:all:", "--python-version", "3.12", "--platform",
             "manylinux_2_28_x86_64", "--target", str(tmp_path / "t"), "--index-url", index,
             f"{PROJECT}==0.1.0+cu129"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        pip = [s for s in served if s.page]
        pip_requests = web_requests(github_standin)
        served.clear()
        github_standin.clear_log()
        done = subprocess.run(
            [str(BIN / "uv"), "pip", "compile", "-", "--index-url", index, "--no-header",
             "--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28", "--quiet"],
            input=f"{PROJECT}==0.1.0+cu129\n", capture_output=True, text=True, check=False,
            env={"PATH": str(BIN), "UV_NO_CACHE": "1", "HOME": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        uv = [s for s in served if s.page]
        uv_requests = web_requests(github_standin)
        html = LOCAL.get(f"{index}k3-kernels/", headers={"Accept": "text/html"})
    assert html.headers["content-type"].startswith("text/html")
    for answers in (pip, uv):
        assert [(s.path, s.page) for s in answers] == [("/cu129/k3-kernels/", "index.json")]
        assert answers[0].accept.startswith("application/vnd.pypi.simple.v1+json")
    for requests in (pip_requests, uv_requests):
        assert requests, "the resolver fetched nothing from the release"
        assert all(path.endswith(".whl.metadata") for path in requests), requests
