"""Releases over time and their consumers, against pypiserver and the stand-in GitHub:
several versions in one index (PEP 658 metadata for every file), the order that keeps
everything private until every destination holds its files, `--replace` without a
missing URL, and bytes that rot under a correct digest."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import httpx

from release.destinations.reach import Reach
from release.downstream.nccl import override_files, write_override_files
from release.publish.run import PublishSettings, publish
from release.records.manifest import Manifest, write_manifest
from release.records.published import read_record
from release.verify.checks import VerifySettings, verify
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.wheels import (
    Release,
    github_destination,
    make_release,
)
from tests.local_http import LOCAL
from tests.pypi_server import PypiServer

BIN = Path(sys.executable).parent
VERSIONS = {"0.1.0": ">=3.9", "0.1.1": ">=3.10", "0.1.1.post1": ">=3.11"}
FAST = VerifySettings(attempts=2, backoff_s=0.05, deadline_s=30, pip=False)


def github_release(tmp_path: Path, gh: GitHubStandIn, version: str, **kw: Any) -> Release:
    return make_release(
        tmp_path / f"dist-{version}",
        pypi=None,
        github=github_destination(gh.api_url, version=version),
        version=version,
        requires_python=VERSIONS.get(version, ">=3.9"),
        **kw,
    )


def with_nccl(release: Release) -> Release:
    files = override_files({12: "2.30.7", 13: "2.30.7"})
    write_override_files(files, release.dist)
    manifest = Manifest(
        project=release.manifest.project,
        version=release.manifest.version,
        wheels=release.manifest.wheels,
        nccl_files=tuple(f.name for f in files),
    )
    write_manifest(manifest, release.dist / "manifest.json")
    return Release(dist=release.dist, manifest=manifest, wheels=release.wheels)


def wheel_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def web_requests(gh: GitHubStandIn) -> list[str]:
    return [e.path for e in gh.request_log if "/releases/download/" in e.path]


def test_replace_on_a_published_release_keeps_the_url_serving(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    env = {"GITHUB_TOKEN": github_standin.token}
    old = github_release(tmp_path / "old", github_standin, "0.1.0", payload=b"old")
    publish(
        PublishSettings(dist=old.dist, index_dir=tmp_path / "site"),
        Reach(env, command="release publish"),
    )
    new = github_release(tmp_path / "new", github_standin, "0.1.0", payload=b"new bytes")
    (wheel,) = new.wheels
    url = f"{github_standin.web_url}/{DEFAULT_REPO}/releases/download/v0.1.0/{wheel.name}"
    seen: list[tuple[int, str]] = []
    stop, polling = threading.Event(), threading.Event()

    def poll() -> None:
        with httpx.Client(follow_redirects=True) as client:
            while not stop.is_set():
                answer = client.get(url)
                seen.append((answer.status_code, hashlib.sha256(answer.content).hexdigest()))
                polling.set()

    poller = threading.Thread(target=poll)
    poller.start()
    assert polling.wait(30)  # the URL is read before the replacement starts
    try:
        github_standin.clear_log()
        publish(
            PublishSettings(dist=new.dist, index_dir=tmp_path / "site", replace=True),
            Reach(env, command="release publish"),
        )
    finally:
        stop.set()
        poller.join()
    writes = [(e.method, e.path) for e in github_standin.request_log if e.method != "GET"]
    methods = [m for m, _ in writes]
    # the new bytes are uploaded and checked first; then DELETE and PATCH back to back
    assert methods[-2:] == ["DELETE", "PATCH"]
    assert "POST" in methods[: methods.index("DELETE")]
    # the URL serves the old bytes, then the new ones; only between the DELETE and the
    # PATCH (GitHub has no atomic swap) can an answer be missing: one short run of 404s,
    # never while the new bytes upload
    old_sha, new_sha = hashlib.sha256(old.wheels[0].read_bytes()).hexdigest(), wheel_sha(wheel)
    states = [("old" if sha == old_sha else "new" if sha == new_sha else str(s)) for s, sha in seen]
    runs = [state for i, state in enumerate(states) if i == 0 or states[i - 1] != state]
    assert runs in (["old", "new"], ["old", "404", "new"]), runs
    assert states.count("old") > 0
    assert LOCAL.get(url, follow_redirects=True).content == wheel.read_bytes()


def test_bytes_that_rot_under_a_right_digest_are_found_and_replaced(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    env = {"GITHUB_TOKEN": github_standin.token}
    release = github_release(tmp_path, github_standin, "0.1.0")
    settings = PublishSettings(dist=release.dist, index_dir=tmp_path / "site")
    publish(settings, Reach(env, command="release publish"))
    (published,) = github_standin.releases(DEFAULT_REPO)
    (wheel,) = release.wheels
    asset = next(a for a in github_standin.assets(published.id) if a.name == wheel.name)
    github_standin.state.corrupt_storage(asset.id, b"x" * asset.size)

    record = read_record(release.dist / "published.json", release.manifest)
    report = verify(record, Reach(env, command="release verify"), FAST)
    assert {(c.check, c.subject) for c in report.failed} >= {("download", wheel.name)}

    untouched = publish(
        settings, Reach(env, command="release publish")
    )  # GitHub's digest says identical: nothing to do
    assert [d.action.value for d in untouched.applied] == ["identical"]
    replaced = publish(
        PublishSettings(dist=release.dist, index_dir=tmp_path / "site", replace=True),
        Reach(env, command="release publish"),
    )
    assert [d.action.value for d in replaced.applied] == ["replace"]
    assert (
        verify(
            read_record(release.dist / "published.json", release.manifest),
            Reach(env, command="release verify"),
            FAST,
        ).failed
        == ()
    )


def test_nccl_files_and_the_release_manifest_are_release_assets(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = with_nccl(github_release(tmp_path, github_standin, "0.1.0"))
    publish(
        PublishSettings(dist=release.dist, index_dir=tmp_path / "site"),
        Reach({"GITHUB_TOKEN": github_standin.token}, command="release publish"),
    )
    (published,) = github_standin.releases(DEFAULT_REPO)
    assets = {a.name: a.data for a in github_standin.assets(published.id)}
    for name in release.manifest.nccl_files:
        assert assets[name] == (release.dist / name).read_bytes()
    manifest = json.loads(assets["release-manifest.json"])
    assert [(w["filename"], w["sha256"]) for w in manifest["wheels"]] == [
        (w.filename, w.sha256) for w in release.manifest.wheels
    ]
    (wheel,) = release.wheels
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("k3_kernels-0.1.0+cu129.dist-info/METADATA")
    assert assets[wheel.name + ".metadata"] == metadata


def watch_matrix(tmp_path: Path, pypi: PypiServer, gh: GitHubStandIn) -> Path:
    """A matrix of the test project whose destinations are pypiserver and the stand-in."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "k3-kernels"\nversion = "0.1.0"\n', encoding="utf-8"
    )
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "project: project\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n"
        "  '13.0': {destination: pypi}\n"
        "  '12.9': {destination: github, local-label: cu129}\n"
        "destinations:\n"
        f"  pypi: {{kind: pypi, repository-url: '{pypi.url}', index-url: '{pypi.index_url}'}}\n"
        f"  github: {{kind: github, repository: {DEFAULT_REPO}, api-url: '{gh.api_url}',"
        " index-url: 'https://k3-org.github.io/k3-kernels/'}\n",
        encoding="utf-8",
    )
    return matrix
