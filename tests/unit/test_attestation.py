"""The PEP 740 attestation beside a PyPI wheel: its subject must be exactly that file."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from release.fsutil import sha256_file
from release.provenance.attestation import (
    Identity,
    attestation_path,
    attestation_refusal,
    attestations_for,
    github_provenance,
    provenance_problem,
    signer_of,
    subject_problem,
)
from tests.integration.wheels import attestation_for, make_wheel


def test_a_matching_attestation_is_sent_and_a_missing_one_is_no_refusal(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    sha256 = sha256_file(wheel)
    assert attestation_refusal(wheel, sha256) is None
    assert attestations_for(wheel) == []
    path = attestation_for(wheel)
    assert path == attestation_path(wheel)
    assert path.name == f"{wheel.name}.publish.attestation"
    assert attestation_refusal(wheel, sha256) is None
    assert attestations_for(wheel) == [str(path)]


def test_other_bytes_or_another_file_are_refused_naming_the_attestation(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    sha256 = sha256_file(wheel)
    attestation_for(wheel, sha256="0" * 64)
    refusal = attestation_refusal(wheel, sha256)
    assert refusal is not None
    assert refusal.startswith(f"{wheel.name}.publish.attestation: it attests sha256 000000000000")
    assert "pypi_attestations sign" in refusal
    attestation_for(wheel, name="k3_kernels-0.0.9-py3-none-any.whl")
    refusal = attestation_refusal(wheel, sha256)
    assert refusal is not None
    assert "it attests 'k3_kernels-0.0.9-py3-none-any.whl'" in refusal


def test_not_an_attestation_or_another_predicate_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    sha256 = sha256_file(wheel)
    problem = subject_problem(wheel.name, sha256, b'{"version": 1}')
    assert problem is not None
    assert problem.startswith("not a PEP 740 attestation (")
    assert subject_problem(wheel.name, sha256, b"not json") is not None
    attestation_for(wheel, predicate_type="https://slsa.dev/provenance/v1")
    problem = subject_problem(wheel.name, sha256, attestation_path(wheel).read_bytes())
    assert problem == (
        "predicate type 'https://slsa.dev/provenance/v1', "
        "not https://docs.pypi.org/attestations/publish/v1"
    )


def test_a_github_wheel_must_be_signed_in_its_own_repository(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    sha256 = sha256_file(wheel)
    attestation_for(wheel, signer=("K3-Org/k3-kernels", ".github/workflows/release.yml"))
    assert attestation_refusal(wheel, sha256, repository="k3-org/k3-kernels") is None
    refusal = attestation_refusal(wheel, sha256, repository="k3-org/other")
    assert refusal is not None
    assert "it was signed in K3-Org/k3-kernels, not k3-org/other" in refusal


def test_the_provenance_object_names_the_signer_and_attests_the_wheel(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    assert github_provenance(wheel) is None, "no attestation, no provenance"
    path = attestation_for(wheel, signer=("k3-org/k3-kernels", ".github/workflows/release.yml"))
    assert signer_of(path.read_bytes()) == Identity(
        repository="k3-org/k3-kernels", workflow=".github/workflows/release.yml"
    )
    body = github_provenance(wheel)
    assert body is not None
    assert github_provenance(wheel) == body, "the same bytes each time: a re-run is identical"
    document = json.loads(body)
    assert document["version"] == 1
    (bundle,) = document["attestation_bundles"]
    assert bundle["publisher"]["kind"] == "GitHub"
    assert bundle["publisher"]["repository"] == "k3-org/k3-kernels"
    assert bundle["publisher"]["workflow"] == "release.yml"
    assert provenance_problem(body, sha256_file(wheel)) is None
    other = provenance_problem(body, "0" * 64)
    assert other is not None
    assert "attests no file of sha256 000000000000" in other
    unreadable = provenance_problem(b"{}", sha256_file(wheel))
    assert unreadable is not None
    assert unreadable.startswith("unreadable provenance")


def test_an_attestation_whose_certificate_names_nobody_has_no_signer(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    path = attestation_for(wheel)
    document = json.loads(path.read_text())
    document["verification_material"]["certificate"] = base64.b64encode(b"not DER").decode()
    path.write_text(json.dumps(document))
    signer = signer_of(path.read_bytes())
    assert isinstance(signer, str)
    assert signer.startswith("its certificate is unreadable")
    assert github_provenance(wheel) is None
    refusal = attestation_refusal(wheel, sha256_file(wheel), repository="k3-org/k3-kernels")
    assert refusal is not None
    assert "its certificate is unreadable" in refusal
