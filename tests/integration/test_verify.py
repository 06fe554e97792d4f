"""`release verify` against what was really published: pypiserver, the stand-in GitHub
(whose storage origin rejects any Authorization header) and a served index."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.credentials import github_token
from release.errors import VerifyError
from release.publish.run import PublishSettings, publish
from release.records.manifest import read_manifest
from release.records.published import Published, PublishedFile, read_record, with_overrides
from release.remote.github import GithubClient
from release.remote.httpclient import client as http_client
from release.remote.httpclient import fetch
from release.verify.checks import Check, VerifySettings, verify
from release.verify.provenance import ProvenanceSources, provenance_checks
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
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
        # the checkout's matrix.yaml names api.github.com, not this release's GitHub: the
        # provenance checks have their own tests below
        args = ["verify", "--dist", str(dist), "--index-url", f"cu129={base}cu129/",
                "--no-provenance", "--json-file", str(tmp_path / "v.json"),
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


# --- Provenance: the stand-in's attestations API serves recorded bundles. ---

PROVENANCE = Path(__file__).parent.parent / "data" / "provenance"
DEMO_WHEEL = "github_provenance_demo-0.0.12-py3-none-any.whl"


def demo_release(pypi: PypiServer, gh: GitHubStandIn, repository: str) -> Published:
    """The recorded wheel as a GitHub asset of `repository`, and a PyPI file on pypiserver
    (which has no integrity API)."""
    data = (PROVENANCE / DEMO_WHEEL).read_bytes()
    wheel = PublishedFile(
        filename=DEMO_WHEEL, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
        kind="github", destination="github", arch="any", local_label=None,
        url=f"{gh.web_url}/{repository}/releases/download/v0.0.12/{DEMO_WHEEL}", index_url=None,
    )  # fmt: skip
    on_pypi = replace(
        wheel, filename="k3_kernels-0.1.0-py3-none-any.whl", kind="pypi", destination="pypi",
        url=f"{pypi.url}packages/k3_kernels-0.1.0-py3-none-any.whl", index_url=pypi.index_url,
    )  # fmt: skip
    return Published(project="k3-kernels", version="0.1.0", files=(wheel, on_pypi))


def provenance_report(
    gh: GitHubStandIn, pypi: PypiServer, repository: str, settings: VerifySettings
) -> dict[str, Check]:
    release = demo_release(pypi, gh, repository)
    client = GithubClient(api_url=gh.api_url, token=github_token({"GITHUB_TOKEN": gh.token}))
    sources = ProvenanceSources(repository=repository, github={"github": (client, repository)})
    with http_client() as http:
        checks = provenance_checks(
            release, sources, settings, lambda url: fetch(http, url, keep=True)
        )
    return {c.subject: c for c in checks}


def test_a_recorded_attestation_of_this_repository_and_workflow_is_ok(
    pypiserver: PypiServer, github_standin: GitHubStandIn
) -> None:
    bundle = json.loads((PROVENANCE / f"{DEMO_WHEEL}.sigstore.json").read_text())
    github_standin.add_repo("actions/attest-demo")
    github_standin.add_attestation("actions/attest-demo", bundle)
    settings = replace(FAST, provenance_workflow=".github/workflows/build-python.yml")
    checks = provenance_report(github_standin, pypiserver, "actions/attest-demo", settings)
    assert checks[DEMO_WHEEL].ok
    assert checks[DEMO_WHEEL].detail == (
        "provenance: actions/attest-demo .github/workflows/build-python.yml "
        "(signature not checked offline)"
    )
    pypi_check = checks["k3_kernels-0.1.0-py3-none-any.whl"]
    assert (pypi_check.ok, pypi_check.detail) == (True, "no provenance")
    assert pypi_check.url == (
        f"{pypiserver.url}integrity/k3-kernels/0.1.0/k3_kernels-0.1.0-py3-none-any.whl/provenance"
    )
    required = provenance_report(
        github_standin,
        pypiserver,
        "actions/attest-demo",
        replace(settings, require_provenance=True),
    )
    assert not required["k3_kernels-0.1.0-py3-none-any.whl"].ok


def test_a_recorded_attestation_naming_another_repository_fails(
    pypiserver: PypiServer, github_standin: GitHubStandIn
) -> None:
    bundle = json.loads((PROVENANCE / f"{DEMO_WHEEL}.sigstore.json").read_text())
    # the destination's repository holds an attestation that another repository made
    github_standin.add_attestation(DEFAULT_REPO, bundle)
    checks = provenance_report(github_standin, pypiserver, DEFAULT_REPO, FAST)
    wheel = checks[DEMO_WHEEL]
    assert not wheel.ok
    assert wheel.detail == (
        "provenance names another repository/workflow: actions/attest-demo "
        f".github/workflows/build-python.yml (expected {DEFAULT_REPO} "
        ".github/workflows/release.yml)"
    )
    assert wheel.url is not None
    assert wheel.url.endswith(f"/attestations/sha256:{wheel_sha(bundle)}")


def wheel_sha(bundle: dict[str, Any]) -> str:
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    digest: str = statement["subject"][0]["digest"]["sha256"]
    return digest
