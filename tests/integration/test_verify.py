"""`release verify` against what was really published: pypiserver, the stand-in GitHub
(whose storage origin rejects any Authorization header) and a served index."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from release.credentials import github_token
from release.destinations.reach import Reach
from release.provenance.signature import ExpectedSigner
from release.publish.run import PublishSettings, publish
from release.records.manifest import read_manifest
from release.records.published import Published, PublishedFile, read_record, with_overrides
from release.remote.github import GithubClient
from release.remote.httpclient import client as http_client
from release.remote.httpclient import fetch
from release.remote.retry import RetryPolicy
from release.verify.checks import Check, VerifySettings, verify
from release.verify.provenance import ProvenanceSources, provenance_checks
from tests.github_standin import DEFAULT_REPO, Fault, GitHubStandIn
from tests.integration.test_publish_e2e import both, serve
from tests.integration.wheels import fulcio_like_certificate
from tests.pypi_server import PypiServer

FAST = VerifySettings(attempts=2, backoff_s=0.05, deadline_s=30, pip=False)
QUICK = RetryPolicy(initial_delay=0.01)  # every try of an outage, without its waits


def published(tmp_path: Path, pypi: PypiServer, gh: GitHubStandIn) -> Path:
    release = both(tmp_path, pypi, gh, arches=("x86_64", "aarch64"))
    env = {**pypi.env(), "GITHUB_TOKEN": gh.token}
    publish(
        PublishSettings(dist=release.dist, index_dir=tmp_path / "site"),
        Reach(env, command="release publish"),
    )
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
        report = verify(
            record,
            Reach(
                {**pypiserver.env(), "GITHUB_TOKEN": github_standin.token}, command="release verify"
            ),
            FAST,
        )
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
        report = verify(record, Reach(pypiserver.env(), command="release verify"), FAST)
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
        report = verify(
            record, Reach(pypiserver.env(), command="release verify"), settings, sleep=sleeps.append
        )
    (download,) = [c for c in report.failed if c.check == "download"]
    assert download.detail == "HTTP 404"
    assert sleeps.count(0.01) >= 1
    assert max(sleeps) <= 0.04


# --- Provenance: the stand-in's attestations API and a served integrity API hold recorded,
# really signed attestations (tests/data/provenance); verified offline. ---

PROVENANCE = Path(__file__).parent.parent / "data" / "provenance"
MODELS = "pypi_attestation_models-0.0.4a2.tar.gz"  # GitHub attestations API, public-good
MODELS_REPO = "trailofbits/pypi-attestation-models"
SDIST = "pypi_attestations-0.0.19.tar.gz"  # PyPI integrity API
DEMO_WHEEL = "github_provenance_demo-0.0.12-py3-none-any.whl"  # GitHub's own instance


def recorded(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PROVENANCE / name).read_text())
    return loaded


def attested_file(gh: GitHubStandIn, repository: str, bundle: dict[str, Any]) -> PublishedFile:
    """The file a recorded bundle attests, as a GitHub asset of `repository`."""
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    (subject,) = statement["subject"]
    name = subject["name"]
    return PublishedFile(
        filename=name, sha256=subject["digest"]["sha256"], size=-1, kind="github",
        destination="github", arch="any", local_label=None,
        url=f"{gh.web_url}/{repository}/releases/download/v0/{name}", index_url=None,
    )  # fmt: skip


def provenance_report(
    gh: GitHubStandIn,
    files: tuple[PublishedFile, ...],
    repository: str,
    settings: VerifySettings,
    *,
    ref: str | None,
) -> dict[str, Check]:
    client = GithubClient(
        api_url=gh.api_url,
        token=github_token({"GITHUB_TOKEN": gh.token}),
        policy=QUICK,
    )
    expected = ExpectedSigner(repository=repository, workflow=settings.provenance_workflow, ref=ref)
    sources = ProvenanceSources(
        expected=expected,
        github={"github": (client, repository)},
        destinations=frozenset({"github", "pypi"}),
    )
    release = Published(project="pypi-attestations", version="0.0.19", files=files)
    with http_client() as http:
        checks = provenance_checks(
            release, sources, settings, lambda url: fetch(http, url, keep=True, policy=QUICK)
        )
    return {c.subject: c for c in checks}


def test_a_real_attestation_from_the_attestations_api_is_verified(
    github_standin: GitHubStandIn,
) -> None:
    bundle = recorded(f"{MODELS}.sigstore")
    github_standin.add_repo(MODELS_REPO)
    github_standin.add_attestation(MODELS_REPO, bundle)
    wheel = attested_file(github_standin, MODELS_REPO, bundle)
    checks = provenance_report(
        github_standin, (wheel,), MODELS_REPO, FAST, ref="refs/tags/v0.0.4a2"
    )
    assert (checks[MODELS].ok, checks[MODELS].detail) == (
        True,
        f"provenance: {MODELS_REPO} .github/workflows/release.yml@refs/tags/v0.0.4a2, "
        "signature verified (Sigstore public-good)",
    )
    assert checks[MODELS].url == (
        f"{github_standin.api_url}/repos/{MODELS_REPO}/attestations/sha256:{wheel.sha256}"
    )
    # another release of the same repository: the tag is not this one's
    later = provenance_report(github_standin, (wheel,), MODELS_REPO, FAST, ref="refs/tags/v0.0.5")
    assert (later[MODELS].ok, later[MODELS].detail) == (
        False,
        "provenance refused: it was signed at refs/tags/v0.0.4a2, not refs/tags/v0.0.5",
    )


def test_a_real_attestation_in_this_repository_made_by_another_is_refused(
    github_standin: GitHubStandIn,
) -> None:
    bundle = recorded(f"{MODELS}.sigstore")
    # the destination's repository holds an attestation that another repository signed
    github_standin.add_attestation(DEFAULT_REPO, bundle)
    wheel = attested_file(github_standin, DEFAULT_REPO, bundle)
    checks = provenance_report(github_standin, (wheel,), DEFAULT_REPO, FAST, ref=None)
    assert (checks[MODELS].ok, checks[MODELS].detail) == (
        False,
        f"provenance refused: it was signed in {MODELS_REPO}, not {DEFAULT_REPO}",
    )


def test_a_forged_attestation_is_refused_even_when_provenance_is_not_required(
    github_standin: GitHubStandIn,
) -> None:
    bundle = recorded(f"{MODELS}.sigstore")
    forged = json.loads(json.dumps(bundle))
    forged["verificationMaterial"]["certificate"]["rawBytes"] = base64.b64encode(
        fulcio_like_certificate(DEFAULT_REPO, ".github/workflows/release.yml")
    ).decode()
    github_standin.add_attestation(DEFAULT_REPO, forged)
    wheel = attested_file(github_standin, DEFAULT_REPO, bundle)
    checks = provenance_report(github_standin, (wheel,), DEFAULT_REPO, FAST, ref=None)
    assert (checks[MODELS].ok, checks[MODELS].detail) == (
        False,
        "provenance refused: its certificate was not issued by Sigstore public-good's Fulcio "
        "(self-signed, or another Sigstore instance's)",
    )


def test_githubs_own_instance_is_unverified_and_fails_even_when_not_required(
    github_standin: GitHubStandIn,
) -> None:
    bundle = recorded(f"{DEMO_WHEEL}.sigstore.json")
    github_standin.add_attestation(DEFAULT_REPO, bundle)
    wheel = attested_file(github_standin, DEFAULT_REPO, bundle)
    unverified = (
        "provenance unverified: GitHub's private-instance bundles need sigstore-python#1529"
    )
    for settings in (FAST, replace(FAST, require_provenance=True)):
        checks = provenance_report(github_standin, (wheel,), DEFAULT_REPO, settings, ref=None)
        assert (checks[DEMO_WHEEL].ok, checks[DEMO_WHEEL].detail) == (False, unverified)


def test_an_outage_of_the_attestations_api_fails_and_never_passes(
    github_standin: GitHubStandIn,
) -> None:
    bundle = recorded(f"{MODELS}.sigstore")
    github_standin.add_attestation(DEFAULT_REPO, bundle)
    wheel = attested_file(github_standin, DEFAULT_REPO, bundle)
    github_standin.faults.add(Fault(path=r"/attestations/", status=503, count=100))
    checks = provenance_report(github_standin, (wheel,), DEFAULT_REPO, FAST, ref=None)
    assert not checks[MODELS].ok
    assert checks[MODELS].detail.startswith("provenance not read: ")


def integrity_site(root: Path) -> Path:
    """PyPI's integrity API for the recorded sdist, as files under `root`."""
    where = root / "integrity" / "pypi-attestations" / "0.0.19" / SDIST / "provenance"
    where.parent.mkdir(parents=True)
    where.write_bytes((PROVENANCE / f"{SDIST}.provenance").read_bytes())
    return root


def pypi_file(base: str) -> PublishedFile:
    return PublishedFile(
        filename=SDIST, sha256="9bb1add04b1b4e182be6b0b80931593f7a291eb49d69b4fd728a5d4cbcdc4bd3",
        size=-1, kind="pypi", destination="pypi", arch="any", local_label=None,
        url=f"{base}packages/{SDIST}", index_url=f"{base}simple/",
    )  # fmt: skip


def test_a_real_provenance_object_from_the_integrity_api_is_verified_and_an_outage_fails(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    repository = "trailofbits/pypi-attestations"
    required = replace(FAST, require_provenance=True)
    with serve(integrity_site(tmp_path / "pypi")) as base:
        checks = provenance_report(
            github_standin, (pypi_file(base),), repository, required, ref="refs/tags/v0.0.19"
        )
        assert (checks[SDIST].ok, checks[SDIST].detail) == (
            True,
            f"provenance: {repository} .github/workflows/release.yml@refs/tags/v0.0.19, "
            "signature verified (Sigstore public-good) [PEP 740 on PyPI]",
        )
        assert checks[SDIST].url == f"{base}integrity/pypi-attestations/0.0.19/{SDIST}/provenance"
        ours = provenance_report(github_standin, (pypi_file(base),), DEFAULT_REPO, FAST, ref=None)
        assert not ours[SDIST].ok
        assert ours[SDIST].detail == (
            f"provenance refused: it was signed in {repository}, not {DEFAULT_REPO} "
            "[PEP 740 on PyPI]"
        )
    # the same server gone: not "no provenance", a failure, required or not
    gone = provenance_report(github_standin, (pypi_file(base),), repository, FAST, ref=None)
    assert not gone[SDIST].ok
    assert gone[SDIST].detail.startswith("provenance not read: ")


def test_pypiserver_without_an_integrity_api_is_no_provenance(
    pypiserver: PypiServer, github_standin: GitHubStandIn
) -> None:
    on_pypi = replace(
        pypi_file(pypiserver.url), filename="k3_kernels-0.1.0-py3-none-any.whl",
        index_url=pypiserver.index_url,
    )  # fmt: skip
    for required in (False, True):
        settings = replace(FAST, require_provenance=required)
        checks = provenance_report(github_standin, (on_pypi,), DEFAULT_REPO, settings, ref=None)
        only = checks[on_pypi.filename]
        assert (only.ok, only.detail) == (not required, "no provenance")
        assert only.url == (
            f"{pypiserver.url}integrity/pypi-attestations/0.0.19/{on_pypi.filename}/provenance"
        )
