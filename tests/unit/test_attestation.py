"""The PEP 740 attestation beside a PyPI wheel: its subject must be exactly that file."""

from __future__ import annotations

from pathlib import Path

from release.fsutil import sha256_file
from release.records.attestation import (
    attestation_path,
    attestation_refusal,
    attestations_for,
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
