"""release.provenance.signature on real signatures (tests/data/provenance, made by Sigstore's
production instance) and on forged ones made from them: verified offline against the trust
root sigstore-python ships."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pypi_attestations import Attestation

from release.provenance.attestation import check_attestation
from release.provenance.signature import (
    BUILD_CONFIG_URI,
    BUILD_SIGNER_URI,
    GITHUB_ACTIONS_ISSUER,
    ISSUER,
    SOURCE_REPOSITORY_REF,
    SOURCE_REPOSITORY_URI,
    ExpectedSigner,
    check_bundle_json,
    public_good,
    public_good_root,
    signed_by,
    signer_problem,
)
from tests.integration.wheels import fulcio_like_certificate

DATA = Path(__file__).parent.parent / "data" / "provenance"
# pypi-attestations' own release, signed by its release workflow at its tag (PEP 740)
PEP740 = "pypi_attestations-0.0.19.tar.gz.publish.attestation"
PEP740_SHA256 = "9bb1add04b1b4e182be6b0b80931593f7a291eb49d69b4fd728a5d4cbcdc4bd3"
PEP740_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestations",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.19",
)
# a Sigstore bundle as GitHub's attestations API serves it (actions/attest, public-good)
BUNDLE = "pypi_attestation_models-0.0.4a2.tar.gz.sigstore"
BUNDLE_SIGNER = ExpectedSigner(
    repository="trailofbits/pypi-attestation-models",
    workflow=".github/workflows/release.yml",
    ref="refs/tags/v0.0.4a2",
)
OTHER = ExpectedSigner(
    repository="k3-org/k3-kernels", workflow=".github/workflows/release.yml", ref="refs/tags/v0.1.0"
)


def pep740() -> Attestation:
    return Attestation.model_validate_json((DATA / PEP740).read_bytes())


def bundle() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / BUNDLE).read_text())
    return loaded


def test_a_real_pep740_attestation_verifies_and_names_its_signer_and_file() -> None:
    checked = check_attestation(pep740(), PEP740_SIGNER)
    assert checked.problem is None
    assert (
        checked.signer
        == "trailofbits/pypi-attestations .github/workflows/release.yml@refs/tags/v0.0.19"
    )
    assert checked.statement is not None
    assert checked.statement["subject"][0]["digest"]["sha256"] == PEP740_SHA256


def test_a_real_bundle_of_the_attestations_api_verifies() -> None:
    checked = check_bundle_json(bundle(), BUNDLE_SIGNER)
    assert (checked.problem, checked.verifiable) == (None, True)
    assert checked.signer == (
        "trailofbits/pypi-attestation-models .github/workflows/release.yml@refs/tags/v0.0.4a2"
    )
    # the same signer, any tag of it
    assert (
        check_bundle_json(bundle(), ExpectedSigner(**{**vars(BUNDLE_SIGNER), "ref": None})).problem
        is None
    )


def test_the_trust_root_is_the_one_sigstore_python_ships_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sigstore's TUF client would cache under these; an offline verifier touches neither
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    public_good.cache_clear()
    public_good_root.cache_clear()
    assert check_attestation(pep740(), PEP740_SIGNER).problem is None
    assert list(tmp_path.iterdir()) == []


# --- Forged, each refused with its own reason. ---


def test_a_self_signed_certificate_naming_the_expected_signer_is_refused() -> None:
    forged = pep740()
    repository, workflow = PEP740_SIGNER.repository, PEP740_SIGNER.workflow
    forged.verification_material.certificate = fulcio_like_certificate(repository, workflow)
    checked = check_attestation(forged, PEP740_SIGNER)
    assert checked.problem == (
        "its certificate was not issued by Sigstore public-good's Fulcio (self-signed, or "
        "another Sigstore instance's)"
    )
    assert checked.statement is None


def test_edited_bytes_break_the_signature() -> None:
    forged = pep740()
    statement = forged.statement
    statement["subject"][0]["digest"]["sha256"] = "0" * 64  # the forger's file
    forged.envelope.statement = json.dumps(statement).encode()
    checked = check_attestation(forged, PEP740_SIGNER)
    assert checked.problem == (
        "its signature does not match its statement (edited bytes, or another key's)"
    )
    tampered = bundle()
    tampered["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(b"x" * 70).decode()
    assert check_bundle_json(tampered, BUNDLE_SIGNER).problem == checked.problem


def test_another_real_certificate_swapped_in_is_refused() -> None:
    forged = pep740()
    other = bundle()["verificationMaterial"]["certificate"]["rawBytes"]  # also Fulcio's
    forged.verification_material.certificate = base64.b64decode(other)
    problem = check_attestation(forged, PEP740_SIGNER).problem
    assert problem == (
        "its certificate was not valid when the transparency log recorded the signature "
        "(expired, or another signature's certificate)"
    )


def test_an_expired_certificate_with_no_log_promise_or_timestamp_is_refused() -> None:
    forged = pep740()
    entry = copy.deepcopy(forged.verification_material.transparency_entries[0])
    del entry["inclusionPromise"]  # what fixes the time of signing, for a Rekor v1 entry
    forged.verification_material.transparency_entries = [entry]
    problem = check_attestation(forged, PEP740_SIGNER).problem
    assert problem is not None
    assert problem.startswith("nothing proves when it was signed")


def test_a_log_time_outside_the_certificate_is_refused() -> None:
    forged = pep740()
    entry = copy.deepcopy(forged.verification_material.transparency_entries[0])
    entry["integratedTime"] = str(int(entry["integratedTime"]) + 3600)  # an hour on
    forged.verification_material.transparency_entries = [entry]
    problem = check_attestation(forged, PEP740_SIGNER).problem
    assert problem is not None
    assert problem.startswith("its certificate was not valid when the transparency log")


@pytest.mark.parametrize(
    ("expected", "problem"),
    [
        (
            OTHER,
            "it was signed in trailofbits/pypi-attestations, not k3-org/k3-kernels",
        ),
        (
            ExpectedSigner(**{**vars(PEP740_SIGNER), "workflow": ".github/workflows/ci.yml"}),
            "it was signed by a run of .github/workflows/release.yml, not .github/workflows/ci.yml",
        ),
        (
            ExpectedSigner(**{**vars(PEP740_SIGNER), "ref": "refs/tags/v0.0.20"}),
            "it was signed at refs/tags/v0.0.19, not refs/tags/v0.0.20",
        ),
        (
            ExpectedSigner(
                **{**vars(PEP740_SIGNER), "signer_workflow": "k3-org/tools/.github/workflows/x.yml"}
            ),
            "it was signed by trailofbits/pypi-attestations/.github/workflows/release.yml"
            "@refs/tags/v0.0.19, not the signer workflow k3-org/tools/.github/workflows/x.yml",
        ),
    ],
    ids=["repository", "workflow", "tag", "signer-workflow"],
)
def test_a_real_signature_of_another_signer_is_refused_naming_the_difference(
    expected: ExpectedSigner, problem: str
) -> None:
    assert check_attestation(pep740(), expected).problem == problem


def test_a_bundle_of_githubs_own_instance_is_not_verifiable_here_and_not_verified() -> None:
    recorded = json.loads(
        (DATA / "github_provenance_demo-0.0.12-py3-none-any.whl.sigstore.json").read_text()
    )
    checked = check_bundle_json(recorded, OTHER)
    assert checked.verifiable is False
    assert checked.statement is None
    assert checked.problem == (
        "unverified: GitHub's private-instance bundles need sigstore-python#1529"
    )
    # the same bundle with its timestamp gone: nothing at all proves when it was signed
    del recorded["verificationMaterial"]["timestampVerificationData"]
    stripped = check_bundle_json(recorded, OTHER)
    assert stripped.verifiable
    assert stripped.problem is not None
    assert stripped.problem.startswith("not a Sigstore bundle sigstore-python accepts")


def test_an_unreadable_bundle_is_refused_with_the_reason() -> None:
    checked = check_bundle_json({"mediaType": "nonsense"}, OTHER)
    assert checked.problem is not None
    assert checked.problem.startswith("not a Sigstore bundle sigstore-python accepts (")


# --- The identity policy on a reusable workflow's claims (gh's --signer-workflow). ---

CALLER = "https://github.com/k3-org/k3-kernels/.github/workflows/release.yml@refs/tags/v0.1.0"
REUSABLE = "https://github.com/k3-org/release-tools/.github/workflows/release.yml@refs/tags/v2"


def claims(signer: str = REUSABLE, **more: str) -> dict[str, str]:
    return {
        ISSUER: GITHUB_ACTIONS_ISSUER,
        SOURCE_REPOSITORY_URI: "https://github.com/K3-Org/k3-kernels",
        SOURCE_REPOSITORY_REF: "refs/tags/v0.1.0",
        BUILD_CONFIG_URI: CALLER,
        BUILD_SIGNER_URI: signer,
        **more,
    }


def test_a_reusable_workflow_signs_for_its_caller_when_named() -> None:
    named = ExpectedSigner(
        **{**vars(OTHER), "signer_workflow": "k3-org/release-tools/.github/workflows/release.yml"}
    )
    assert signer_problem(claims(), named) is None
    pinned = ExpectedSigner(
        **{**vars(named), "signer_workflow": f"{named.signer_workflow}@refs/tags/v2"}
    )
    assert signer_problem(claims(), pinned) is None
    assert signer_problem(
        claims(),
        ExpectedSigner(
            **{**vars(named), "signer_workflow": f"{named.signer_workflow}@refs/tags/v1"}
        ),
    ) == (
        "it was signed by k3-org/release-tools/.github/workflows/release.yml@refs/tags/v2, not "
        "the signer workflow k3-org/release-tools/.github/workflows/release.yml@refs/tags/v1"
    )
    assert signed_by(claims()) == (
        "k3-org/k3-kernels .github/workflows/release.yml@refs/tags/v0.1.0 via "
        "k3-org/release-tools/.github/workflows/release.yml@refs/tags/v2"
    )


def test_a_reusable_workflow_not_named_is_refused_with_the_remedy() -> None:
    assert signer_problem(claims(), OTHER) == (
        "it was signed by the reusable workflow "
        "k3-org/release-tools/.github/workflows/release.yml@refs/tags/v2 "
        "(name it with --provenance-signer-workflow)"
    )
    assert signer_problem(claims(signer=CALLER), OTHER) is None  # the workflow signed itself


def test_a_branch_build_or_another_issuer_is_refused() -> None:
    branch = claims(signer=CALLER.replace("refs/tags/v0.1.0", "refs/heads/main"))
    branch[SOURCE_REPOSITORY_REF] = "refs/heads/main"
    branch[BUILD_CONFIG_URI] = branch[BUILD_SIGNER_URI]
    any_tag = ExpectedSigner(**{**vars(OTHER), "ref": None})
    assert signer_problem(branch, any_tag) == "it was signed at refs/heads/main, not a tag"
    gitlab = claims(**{ISSUER: "https://gitlab.com"})
    assert signer_problem(gitlab, OTHER) == (
        "its certificate was issued to https://gitlab.com, not to GitHub Actions"
    )
