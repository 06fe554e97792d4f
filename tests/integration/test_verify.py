"""`release verify` against what was really published: pypiserver, the stand-in GitHub
(whose storage origin rejects any Authorization header) and a served index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from release.cli import main
from release.errors import VerifyError
from release.publish.run import PublishSettings, publish
from release.records.manifest import read_manifest
from release.records.published import Published, read_record, with_overrides
from release.verify.checks import VerifySettings, verify
from tests.github_standin import GitHubStandIn
from tests.integration.conftest import PypiServer
from tests.integration.test_publish_e2e import both, credentials, serve

FAST = VerifySettings(attempts=2, backoff_s=0.05, deadline_s=30, pip=False)


def published(tmp_path: Path, pypi: PypiServer, gh: GitHubStandIn) -> Path:
    release = both(tmp_path, pypi, gh, arches=("x86_64", "aarch64"))
    env = {**pypi.env(), "GITHUB_TOKEN": gh.token}
    publish(PublishSettings(dist=release.dist, index_dir=tmp_path / "site"), env)
    return release.dist


@contextmanager
def record_served(tmp_path: Path, dist: Path) -> Iterator[Published]:
    """The publish record, with the cu129 index served from the directory it was written to."""
    record = read_record(dist / "published.json", read_manifest(dist / "manifest.json"))
    with serve(tmp_path / "site") as base:
        yield with_overrides(record, {"cu129": f"{base}cu129/"})


def test_a_good_publish_verifies_and_the_token_never_reaches_storage(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    dist = published(tmp_path, pypiserver, github_standin)
    github_standin.clear_log()
    with record_served(tmp_path, dist) as record:
        report = verify(record, {**pypiserver.env(), "GITHUB_TOKEN": github_standin.token}, FAST)
    assert report.failed == ()
    downloads = [c for c in report.checks if c.check == "download"]
    assert len([c for c in downloads if c.subject.endswith(".whl")]) == 4
    # beside them: the two PEP 658 sidecars on GitHub and the release manifest
    assert sorted(c.subject for c in downloads if not c.subject.endswith(".whl")) == [
        "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl.metadata",
        "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl.metadata",
        "release-manifest.json",
    ]
    assert len([c for c in report.checks if c.check == "metadata"]) == 2
    web = [r for r in github_standin.request_log if "/releases/download/" in r.path]
    storage = [r for r in github_standin.request_log if r.origin == "storage"]
    assert web
    assert all(r.header("authorization") is not None for r in web)  # the token was sent...
    assert storage
    assert all(r.header("authorization") is None for r in storage)  # ...and dropped here
    assert all(r.status == 200 for r in storage)


def test_other_bytes_at_the_url_fail_download_and_listing(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    dist = published(tmp_path, pypiserver, github_standin)
    victim = next(pypiserver.packages.glob("*x86_64.whl"))
    victim.write_bytes(victim.read_bytes() + b"tampered")
    with record_served(tmp_path, dist) as record:
        report = verify(record, pypiserver.env(), FAST)
    failed = {(c.check, c.subject) for c in report.failed}
    assert failed == {("download", victim.name), ("listing", victim.name)}


def test_a_missing_file_fails_after_bounded_retries(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    dist = published(tmp_path, pypiserver, github_standin)
    victim = next(pypiserver.packages.glob("*aarch64.whl"))
    victim.unlink()
    sleeps: list[float] = []
    settings = VerifySettings(attempts=3, backoff_s=0.01, deadline_s=30, pip=False)
    with record_served(tmp_path, dist) as record:
        report = verify(record, pypiserver.env(), settings, sleep=sleeps.append)
    (download,) = [c for c in report.failed if c.check == "download"]
    assert download.detail == "HTTP 404"
    assert sleeps.count(0.01) >= 1
    assert max(sleeps) <= 0.04


@pytest.mark.slow
def test_cli_verify_with_pip_writes_json_and_markdown_and_fails_with_exit_7(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    dist = published(tmp_path, pypiserver, github_standin)
    with serve(tmp_path / "site") as base:
        args = ["verify", "--dist", str(dist), "--index-url", f"cu129={base}cu129/",
                "--json-file", str(tmp_path / "v.json"),
                "--markdown", str(tmp_path / "v.md")]  # fmt: skip
        assert main(args) == 0
        data = json.loads((tmp_path / "v.json").read_text())
        assert data["ok"] is True
        picks = sorted(c["detail"] for c in data["checks"] if c["check"] == "pip")
        assert len(picks) == 4
        assert all(p.startswith("picks k3_kernels-0.1.0") for p in picks)
        assert "all checks passed" in (tmp_path / "v.md").read_text()
        assert "all checks passed" in summary.read_text()

        (index_page := tmp_path / "site" / "cu129" / "k3-kernels" / "index.html").write_text(
            index_page.read_text().replace("#sha256=", "#sha256=00")
        )
        capsys.readouterr()
        assert main([*args, "--no-pip"]) == VerifyError.exit_code
    _, err = capsys.readouterr()
    assert "checks failed" in err
    assert json.loads((tmp_path / "v.json").read_text())["ok"] is False
