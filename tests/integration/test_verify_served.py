"""`release verify` inspects every wheel it downloads again, from the bytes served, and reads
every index page whole: a release published to pypiserver and the stand-in GitHub, with one
fault that the build recorded as it was (the sha256 matches), fails naming the rule, the
file and the URL."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from release.cli import main
from release.destinations.reach import Reach
from release.publish.run import PublishSettings, publish
from release.records.manifest import write_manifest
from release.remote.httpclient import fetch
from tests.github_standin import GitHubStandIn
from tests.integration.indexes import ELF
from tests.integration.test_publish_e2e import both, serve
from tests.integration.wheels import Release, entry_for, make_wheel
from tests.pypi_server import PypiServer

CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def with_library(release: Release, filename: str, library: bytes) -> Release:
    """`release` with `filename` rebuilt holding `library`, recorded so in the manifest (as a
    build that let it through would have)."""
    old = next(e for e in release.manifest.wheels if e.filename == filename)
    _, version, _, _, platform = filename.removesuffix(".whl").split("-")
    wheel = make_wheel(
        release.dist, version=version, platform=platform,
        members={"k3_kernels/_C.so": library},
    )  # fmt: skip
    entry = entry_for(wheel, old.destination, cuda=old.cuda)
    wheels = tuple(entry if e.filename == filename else e for e in release.manifest.wheels)
    manifest = replace(release.manifest, wheels=wheels)
    write_manifest(manifest, release.dist / "manifest.json")
    return replace(release, manifest=manifest)


@contextmanager
def published(
    tmp_path: Path, pypi: PypiServer, gh: GitHubStandIn, *, library: bytes | None = None
) -> Iterator[tuple[Path, str]]:
    """A two-arch release published, its cu129 index served; (dist, the index's base URL)."""
    release = both(tmp_path, pypi, gh, arches=("x86_64", "aarch64"))
    if library is not None:
        release = with_library(release, CU129, library)
    env = {**pypi.env(), "GITHUB_TOKEN": gh.token}
    reach = Reach(env, command="release publish")
    publish(PublishSettings(dist=release.dist, index_dir=tmp_path / "site"), reach)
    with serve(tmp_path / "site") as base:
        yield release.dist, base


def credentials(pypi: PypiServer, gh: GitHubStandIn) -> dict[str, str]:
    return {**pypi.env(), "GITHUB_TOKEN": gh.token}


RunVerify = Callable[[Path, str], tuple[int, list[dict[str, Any]], str]]


@pytest.fixture
def run_verify(
    pypiserver: PypiServer, github_standin: GitHubStandIn,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> RunVerify:  # fmt: skip
    """`verify` of a dist published to this test's servers, with their credentials."""

    def run(dist: Path, base: str) -> tuple[int, list[dict[str, Any]], str]:
        env = credentials(pypiserver, github_standin)
        return verify(dist, base, env, monkeypatch=monkeypatch, capsys=capsys)

    return run


def verify(
    dist: Path, base: str, env: dict[str, str], *, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, list[dict[str, Any]], str]:  # fmt: skip
    """`release verify --json` of `dist` with the credentials `env`: exit, checks, stderr."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(["verify", "--dist", str(dist), "--index-url", f"cu129={base}cu129/",
                 "--no-pip", "--no-provenance", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    return code, json.loads(out)["checks"], err


def test_a_clean_release_is_inspected_again_and_its_pages_read_whole(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    run_verify: RunVerify,
) -> None:  # fmt: skip
    with published(tmp_path, pypiserver, github_standin) as (dist, base):
        code, checks, _ = run_verify(dist, base)
    assert code == 0
    inspected = [c for c in checks if c["check"] == "inspection"]
    assert len(inspected) == 4
    assert all(c["ok"] and c["detail"].startswith("inspected again from the bytes served")
               for c in inspected)  # fmt: skip
    pages = sorted(c["subject"] for c in checks if c["check"] == "index-page")
    assert pages == sorted([f"{base}cu129/k3-kernels/", f"{pypiserver.url}simple/k3-kernels/"])


def test_a_wheel_the_build_let_through_fails_verify_by_its_rule(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    run_verify: RunVerify,
) -> None:  # fmt: skip
    """vllm#41103's fault: a manylinux_2_28 wheel whose library needs GLIBC_2.34."""
    library = (ELF / "x86_64-glibc2.34.so").read_bytes()
    with published(tmp_path, pypiserver, github_standin, library=library) as (dist, base):
        code, checks, err = run_verify(dist, base)
    assert code == 7
    failed = [c for c in checks if not c["ok"]]
    assert [(c["check"], c["subject"]) for c in failed] == [("manylinux", CU129)]
    assert failed[0]["url"].endswith(f"/releases/download/v0.1.0/{CU129}")
    assert failed[0]["detail"] == (
        "k3_kernels/_C.so needs GLIBC_2.34; manylinux_2_28_x86_64 allows at most GLIBC_2.28"
    )
    assert "error: 1 of " in err
    assert f"first: manylinux {CU129}" in err
    assert "hint: the wheel as served breaks that rule (docs/verify.md#the-rules)" in err


def test_a_page_listing_a_wheel_twice_or_one_the_release_lacks_fails(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    run_verify: RunVerify,
) -> None:  # fmt: skip
    """sgl-project/whl's fault (a re-uploaded asset's line appended after the old one, so
    that the last listing, the one the listing and index checks read, is right) and a link
    named for a wheel of the version the release does not have."""
    stray_name = CU129.replace("cu129", "cu130")
    with published(tmp_path, pypiserver, github_standin) as (dist, base):
        page = tmp_path / "site" / "cu129" / "k3-kernels" / "index.html"
        text = page.read_text()
        anchor = next(a for a in re.findall(r"<a [^>]*>[^<]*</a>", text) if CU129 in a)
        old = re.sub(r"sha256=[0-9a-f]{64}", "sha256=" + "e" * 64, anchor)
        stray = anchor.replace(f">{CU129}<", f">{stray_name}<")  # served bytes, another name
        page.write_text(text.replace(anchor, f"{old}<br>\n{anchor}<br>\n{stray}"))
        code, checks, err = run_verify(dist, base)
    assert code == 7
    failed = {(c["check"], c["subject"]) for c in checks if not c["ok"]}
    assert failed == {("duplicate", CU129), ("hash", CU129), ("stray-link", stray_name)}
    assert "error: 3 of " in err


def test_a_metadata_file_that_is_not_the_served_wheels_fails(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    run_verify: RunVerify,
) -> None:  # fmt: skip
    """The page links the wheel's own bytes at a mirror whose PEP 658 `.metadata` adds a
    requirement, with the page's metadata hash set to it: pip resolves from that file alone,
    and verify compared it with the page's hash only."""
    with published(tmp_path, pypiserver, github_standin) as (dist, base):
        site = tmp_path / "site"
        mirror = site / "mirror"
        mirror.mkdir()
        (mirror / CU129).write_bytes((dist / CU129).read_bytes())
        forged = b"Metadata-Version: 2.4\nName: k3-kernels\nVersion: 0.1.0+cu129\n"
        forged += b"Requires-Dist: evil-package>=6.6.6\n"
        (mirror / f"{CU129}.metadata").write_bytes(forged)
        page = site / "cu129" / "k3-kernels" / "index.html"
        text = page.read_text()
        anchor = next(a for a in re.findall(r"<a [^>]*>[^<]*</a>", text) if CU129 in a)
        link = re.sub(r'href="[^"#]*', f'href="{base}mirror/{CU129}', anchor)
        link = re.sub(
            r"(data-(?:core|dist-info)-metadata=\"sha256=)[0-9a-f]{64}",
            lambda m: m.group(1) + hashlib.sha256(forged).hexdigest(),
            link,
        )
        assert link != anchor
        page.write_text(text.replace(anchor, link))
        (page.parent / "index.json").unlink(missing_ok=True)  # the HTML page alone is served
        code, checks, _ = run_verify(dist, base)
    failed = [c for c in checks if not c["ok"]]
    assert code == 7
    assert [(c["check"], c["url"]) for c in failed] == [
        ("metadata", f"{base}mirror/{CU129}.metadata")
    ]
    assert failed[0]["detail"].startswith("not the served wheel's METADATA: sha256 ")


def test_a_download_that_cannot_be_written_is_a_failed_read_not_a_bug(tmp_path: Path) -> None:
    """A disk that fills (or a scratch directory gone) mid-download ended verify in
    `error: ?: No space left on device`, with no report."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.whl").write_bytes(b"x" * 1000)
    with serve(tmp_path / "site") as base, httpx.Client() as client:
        got = fetch(client, f"{base}a.whl", into=tmp_path / "gone" / "a.whl")
        kept = fetch(client, f"{base}a.whl", into=tmp_path / "a.whl", max_bytes=10)
    assert got.status is None
    assert got.error is not None
    assert got.error.startswith(f"cannot write the download into {tmp_path / 'gone' / 'a.whl'}")
    assert kept.error is not None  # past its bound: not read further
