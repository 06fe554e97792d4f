"""PEP 740's records, read with pypi-attestations (this project's one user of it): the
attestation beside a PyPI wheel, `<wheel>.publish.attestation`, as
`python -m pypi_attestations sign` writes it (in the publish job, with its OIDC identity);
and the provenance object PyPI's integrity API serves for a file (`read_provenance`).

PyPI checks an attestation's signature against the trusted publisher and its statement's
subject against the file, and rejects the upload when either is wrong: by then other files
of the release may be public. The subject (one file, this name, this sha256) is checked
here, with the other refusals, before anything is uploaded; the signature stays PyPI's to
check (it needs Sigstore's trust root, which a dry run on a laptop may not reach).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pypi_attestations import Attestation, AttestationType, GitHubPublisher, Provenance

SUFFIX = ".publish.attestation"


def attestation_path(wheel: Path) -> Path:
    """Where `pypi_attestations sign` writes the wheel's attestation."""
    return wheel.with_name(wheel.name + SUFFIX)


def subject_problem(filename: str, sha256: str, document: bytes) -> str | None:
    """Why `document` is not a PEP 740 publish attestation of exactly this file, or None.
    Pure."""
    try:
        statement = Attestation.model_validate_json(document).statement
    except (ValidationError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"not a PEP 740 attestation ({first})"
    kind = statement.get("predicateType")
    if kind != AttestationType.PYPI_PUBLISH_V1.value:
        return f"predicate type {kind!r}, not {AttestationType.PYPI_PUBLISH_V1.value}"
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return "its statement must name exactly one subject"
    name = subjects[0].get("name")
    digest = subjects[0].get("digest")
    got = digest.get("sha256") if isinstance(digest, dict) else None
    if name != filename:
        return f"it attests {name!r}, not {filename}"
    if got != sha256:
        return f"it attests sha256 {str(got)[:12]}..., the wheel is {sha256[:12]}..."
    return None


def attestation_refusal(wheel: Path, sha256: str) -> str | None:
    """Why the attestation beside `wheel` must not be sent with it; None when it matches or
    when there is none (the wheel is then uploaded without one)."""
    path = attestation_path(wheel)
    try:
        document = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path.name}: {error.strerror}"
    problem = subject_problem(wheel.name, sha256, document)
    if problem is None:
        return None
    remedy = "delete it and sign the wheel again: python -m pypi_attestations sign"
    return f"{path.name}: {problem} ({remedy})"


def attestations_for(wheel: Path) -> list[str]:
    """The attestation files twine sends with the wheel: its `.publish.attestation`, if any."""
    path = attestation_path(wheel)
    return [str(path)] if path.is_file() else []


@dataclass(frozen=True, kw_only=True)
class ProvenanceEntry:
    """One attestation of a PEP 740 provenance object, with the publisher of its bundle."""

    publisher_kind: str  # "GitHub", "GitLab", "Google", ...
    repository: str | None  # a GitHub publisher's owner/name
    workflow: str | None  # a GitHub publisher's workflow, as PyPI names it (release.yml)
    statement: Mapping[str, Any]
    certificate: bytes  # DER


def read_provenance(body: bytes) -> list[ProvenanceEntry] | str:
    """The attestations of a PEP 740 provenance object, or why it is not one."""
    try:
        provenance = Provenance.model_validate_json(body)
    except ValidationError as error:
        return f"unreadable provenance: {error.errors()[0].get('msg', 'invalid')}"
    out: list[ProvenanceEntry] = []
    for bundle in provenance.attestation_bundles:
        publisher = bundle.publisher
        github = isinstance(publisher, GitHubPublisher)
        for attestation in bundle.attestations:
            out.append(
                ProvenanceEntry(
                    publisher_kind=str(publisher.kind),
                    repository=publisher.repository if github else None,  # type: ignore[union-attr]
                    workflow=publisher.workflow if github else None,  # type: ignore[union-attr]
                    statement=attestation.statement,
                    certificate=attestation.verification_material.certificate,
                )
            )
    return out
