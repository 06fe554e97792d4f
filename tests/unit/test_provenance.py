"""release.verify.provenance's core on recorded attestations (tests/data/provenance): real
signatures, verified offline, and forged ones beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pypi_attestations import Attestation, AttestationBundle, GitHubPublisher, Provenance

from release.provenance.attestation import checked_provenance
from release.provenance.signature import Checked, ExpectedSigner
from release.records.published import PublishedFile
from release.remote.httpclient import Download
from release.remote.simple_index import ListedFile
from release.verify.checks import NO_SIGNER, provenance_link_check
from release.verify.provenance import (
    check_github_attestation,
    integrity_url,
    predicate_workflow,
    provenance_check,
)
from tests.integration.wheels import attestation_for, make_wheel

DATA = Path(__file__).parent.parent / "data" / "provenance"
MODELS = "pypi_attestation_models-0.0.4a2.tar.gz"  # GitHub's attestations API, public-good
MODELS_SHA256 = "c9709ce6fd5b67b59b4a28758cf14d3f411803c4b89b6068b1f1a8e4ee94c8ef"
MODELS_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestation-models",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.4a2",
)
SDIST = "pypi_attestations-0.0.19.tar.gz"  # PyPI's integrity API
SDIST_SHA256 = "9bb1add04b1b4e182be6b0b80931593f7a291eb49d69b4fd728a5d4cbcdc4bd3"
SDIST_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestations",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.19",
)
DEMO_WHEEL = "github_provenance_demo-0.0.12-py3-none-any.whl"  # GitHub's own instance
DEMO_SHA256 = "ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b"
OURS = ExpectedSigner(
    repository="k3-org/k3-kernels", workflow=".github/workflows/release.yml", ref="refs/tags/v0.1.0"
)
WHERE = "https://api.example/repos/x/y/attestations/sha256:..."


def item(name: str) -> dict[str, Any]:
    return {"bundle": json.loads((DATA / name).read_text()), "repository_id": 1}


def file(name: str = MODELS, sha256: str = MODELS_SHA256) -> PublishedFile:
    return PublishedFile(
        filename=name,
        sha256=sha256,
        size=1437,
        kind="github",
        destination="github",
        arch="any",
        local_label=None,
        url=f"https://example.invalid/{name}",
        index_url="https://pypi.example/simple/",
    )


def github_check(
    items: list[dict[str, Any]] | None,
    expected: ExpectedSigner,
    *,
    sha256: str = MODELS_SHA256,
    required: bool = False,
) -> tuple[bool, str]:
    checked = (
        None if items is None else [check_github_attestation(i, sha256, expected) for i in items]
    )
    check = provenance_check(file(sha256=sha256).filename, checked, required=required, where=WHERE)
    return check.ok, check.detail


def test_a_real_attestation_of_the_expected_signer_is_verified() -> None:
    assert github_check([item(f"{MODELS}.sigstore")], MODELS_SIGNER) == (
        True,
        "provenance: trailofbits/pypi-attestation-models .github/workflows/release.yml"
        "@refs/tags/v0.0.4a2, signature verified (Sigstore public-good)",
    )


def test_a_real_attestation_of_another_repository_is_refused() -> None:
    assert github_check([item(f"{MODELS}.sigstore")], OURS) == (
        False,
        "provenance refused: it was signed in trailofbits/pypi-attestation-models, "
        "not k3-org/k3-kernels",
    )


def test_a_real_attestation_of_other_bytes_is_refused() -> None:
    ok, detail = github_check([item(f"{MODELS}.sigstore")], MODELS_SIGNER, sha256="0" * 64)
    assert (ok, detail) == (
        False,
        "provenance refused: it attests c9709ce6fd5b..., not this file's sha256 000000000000...",
    )


def test_a_bundle_made_from_a_pep740_attestation_verifies_and_a_predicate_workflow_reads() -> None:
    slsa = Attestation.model_validate_json(
        (DATA / f"{SDIST}.publish.attestation").read_bytes()
    ).to_bundle()
    served = {"bundle": json.loads(slsa.to_json())}  # a PEP 740 bundle, as the API would
    checked = check_github_attestation(served, SDIST_SHA256, SDIST_SIGNER)
    assert checked.problem is None
    statement = {
        "predicate": {
            "buildDefinition": {
                "externalParameters": {
                    "workflow": {
                        "repository": "https://github.com/k3-org/k3-kernels",
                        "path": ".github/workflows/release.yml",
                    }
                }
            }
        }
    }
    assert predicate_workflow(statement) == ("k3-org/k3-kernels", ".github/workflows/release.yml")
    assert predicate_workflow({"predicate": None}) is None


def test_githubs_own_instance_is_unverified_a_failure_never_no_provenance() -> None:
    items = [item(f"{DEMO_WHEEL}.sigstore.json")]
    unverified = (
        False,
        "provenance unverified: GitHub's private-instance bundles need sigstore-python#1529",
    )
    assert github_check(items, OURS, sha256=DEMO_SHA256) == unverified
    assert github_check(items, OURS, sha256=DEMO_SHA256, required=True) == unverified


def test_one_verified_attestation_among_refused_ones_is_enough() -> None:
    items = [item(f"{DEMO_WHEEL}.sigstore.json"), {"bundle": "x"}, item(f"{MODELS}.sigstore")]
    ok, detail = github_check(items, MODELS_SIGNER)
    assert ok
    assert "signature verified" in detail
    ok, detail = github_check([*items[:2], {"bundle": {"mediaType": "x"}}], MODELS_SIGNER)
    assert not ok
    assert detail == (
        "provenance refused: unreadable bundle: the item holds no bundle object "
        "(and 1 more refused)"
    )


def test_no_attestation_is_reported_and_fails_only_when_required() -> None:
    assert github_check(None, OURS) == (True, "no provenance")
    assert github_check([], OURS, required=True) == (False, "no provenance")


def test_a_real_pypi_provenance_object_is_verified() -> None:
    body = (DATA / f"{SDIST}.provenance").read_bytes()
    checked = checked_provenance(body, SDIST_SHA256, SDIST_SIGNER)
    check = provenance_check(SDIST, checked, required=True, where=WHERE)
    assert (check.ok, check.detail) == (
        True,
        "provenance: trailofbits/pypi-attestations .github/workflows/release.yml"
        "@refs/tags/v0.0.19, signature verified (Sigstore public-good)",
    )


def test_a_real_pypi_provenance_of_another_publisher_kind_is_refused() -> None:
    body = (DATA / "gcb_attestation_test-0.0.0.tar.gz.provenance").read_bytes()
    sha256 = "461317362419124b6012e855423a9078d6de8aed3e74fa78cc74d669b23dc6cf"
    (checked,) = checked_provenance(body, sha256, OURS)
    assert checked.problem == (
        "its certificate was issued to https://accounts.google.com, not to GitHub Actions"
    )


def test_the_test_suites_self_signed_provenance_object_is_refused(tmp_path: Path) -> None:
    """What tests/integration/wheels.py makes (a certificate of its own, a made-up log
    entry) names the expected repository and workflow: verify used to pass it."""
    wheel = make_wheel(tmp_path)
    attestation = Attestation.model_validate_json(attestation_for(wheel).read_bytes())
    publisher = GitHubPublisher(repository=OURS.repository, workflow="release.yml")
    body = Provenance(
        attestation_bundles=[AttestationBundle(publisher=publisher, attestations=[attestation])]
    ).model_dump_json()
    sha256 = attestation.statement["subject"][0]["digest"]["sha256"]
    expected = ExpectedSigner(**{**vars(OURS), "ref": None})
    (checked,) = checked_provenance(body.encode(), sha256, expected)
    assert checked == Checked(problem="not a Sigstore bundle (logId: Field required)")


def test_an_unreadable_pypi_provenance_is_refused() -> None:
    (checked,) = checked_provenance(b'{"version": 1}', SDIST_SHA256, SDIST_SIGNER)
    assert checked.problem is not None
    assert checked.problem.startswith("unreadable provenance")
    check = provenance_check(file().filename, [checked], required=False, where=WHERE)
    assert not check.ok


def test_the_integrity_url_is_on_the_index_origin() -> None:
    url = integrity_url(file("k3_kernels-0.1.0-py3-none-any.whl"), "K3_Kernels", "0.1.0")
    assert url == (
        "https://pypi.example/integrity/k3-kernels/0.1.0/k3_kernels-0.1.0-py3-none-any.whl/provenance"
    )


def linked() -> ListedFile:
    return ListedFile(
        name=SDIST, url=f"https://files.example/{SDIST}", sha256=SDIST_SHA256, size=None,
        hash_name="sha256", requires_python=None, metadata_sha256=None,
        provenance_url=f"https://files.example/{SDIST}.provenance",
    )  # fmt: skip


def link_check(
    body: bytes | None, signer: ExpectedSigner | None, *, status: int = 200, required: bool = False
) -> tuple[bool, str]:
    got = Download(status=status, body=body)
    check = provenance_link_check(
        SDIST, linked(), got, "https://index.example/p/", signer=signer, required=required
    )
    assert check.url == f"https://files.example/{SDIST}.provenance"
    return check.ok, check.detail


def test_an_index_link_to_a_real_provenance_object_is_verified_and_another_refused() -> None:
    real = (DATA / f"{SDIST}.provenance").read_bytes()
    assert link_check(real, SDIST_SIGNER) == (
        True,
        "provenance: trailofbits/pypi-attestations .github/workflows/release.yml"
        "@refs/tags/v0.0.19, signature verified (Sigstore public-good)",
    )
    ok, detail = link_check(real, OURS)
    assert (ok, detail) == (
        False,
        "provenance refused: it was signed in trailofbits/pypi-attestations, not k3-org/k3-kernels",
    )
    assert link_check(None, SDIST_SIGNER, status=502) == (False, "does not resolve: HTTP 502")
    assert link_check(real, None) == (True, NO_SIGNER)
    assert link_check(real, None, required=True) == (False, NO_SIGNER)
