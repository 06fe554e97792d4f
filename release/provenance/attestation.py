"""PEP 740's records, read with pypi-attestations (this project's one user of it): the
attestation beside a wheel, `<wheel>.publish.attestation`, as `python -m pypi_attestations
sign` writes it (in the publish job, with its OIDC identity); the provenance object PyPI's
integrity API serves for a file (`read_provenance`); and the provenance object this tool
publishes beside a GitHub-hosted wheel, `<wheel>.provenance`, which the index links to.

PyPI checks an attestation's signature against the trusted publisher and its statement's
subject against the file, and rejects the upload when either is wrong: by then other files
of the release may be public. The subject (one file, this name, this sha256) is checked
here, with the other refusals, before anything is uploaded. The signature, its certificate
chain and its log entry are checked where provenance is read back (`check_attestation`,
`checked_provenance`: `release verify`, with release.provenance.signature). For a GitHub-hosted
wheel, the index takes PyPI's place: the provenance object names the publisher its Fulcio
certificate names (which must be the release's repository), and `release verify` or a
client (`pypi-attestations verify attestation`) checks the signature against it.

Every reader here takes hostile bytes (PyPI's integrity API, a Release asset, a file in
dist/): what pydantic, pypi-attestations, sigstore and json raise on them comes back as a
one-line reason (release.provenance.signature.reason), never as an exception.

pypi-attestations and cryptography are imported where an attestation is read, made or
checked, so that a publish with no attestation beside its wheels, and a plan, load neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sigstore.errors import Error as SigstoreError

from release.provenance.signature import (
    HOSTILE,
    Checked,
    ExpectedSigner,
    bundle_problem,
    check_bundle,
    claims_of,
    error_text,
    reason,
)

if TYPE_CHECKING:
    from pypi_attestations import Attestation

SUFFIX = ".publish.attestation"
PROVENANCE_SUFFIX = ".provenance"  # the PEP 740 provenance object beside a GitHub-hosted wheel
# Fulcio's certificate extensions (github.com/sigstore/fulcio docs/oid-info.md)
SOURCE_REPOSITORY_URI = "1.3.6.1.4.1.57264.1.12"
BUILD_SIGNER_URI = "1.3.6.1.4.1.57264.1.9"


@dataclass(frozen=True, kw_only=True)
class Identity:
    """Who made an attestation: a repository (owner/name) and a workflow path in it."""

    repository: str
    workflow: str

    def __str__(self) -> str:
        return f"{self.repository} {self.workflow}"

    def matches(self, other: Identity) -> bool:
        # GitHub names are case-insensitive; paths in a repository are not
        return self.repository.lower() == other.repository.lower() and (
            self.workflow == other.workflow
        )


def repository_of_url(url: str) -> str:
    """`https://github.com/owner/name` -> `owner/name`."""
    return "/".join(urlsplit(url).path.strip("/").split("/")[:2])


def _signer_identity(uri: str) -> Identity | None:
    """A build signer URI, `https://github.com/owner/name/.github/workflows/x.yml@ref`."""
    path = urlsplit(uri).path.strip("/").split("@", 1)[0]
    parts = path.split("/")
    if len(parts) < 3:
        return None
    return Identity(repository="/".join(parts[:2]), workflow="/".join(parts[2:]))


def certificate_identities(der: bytes) -> list[Identity]:
    """What a Fulcio certificate's extensions name: the source repository with the build
    signer's workflow."""
    from cryptography import x509

    claims = claims_of(x509.load_der_x509_certificate(der))
    signer = _signer_identity(claims[BUILD_SIGNER_URI]) if BUILD_SIGNER_URI in claims else None
    if signer is None:
        return []
    source = claims.get(SOURCE_REPOSITORY_URI)
    repository = repository_of_url(source) if source else signer.repository
    return [Identity(repository=repository, workflow=signer.workflow)]


def statement_of(attestation: Attestation) -> Mapping[str, Any] | str:
    """An attestation's in-toto statement (unsigned until checked), or why it is none: its
    envelope carries bytes that need not be JSON, nor a JSON object."""
    try:
        statement = attestation.statement
    except HOSTILE:
        return "its statement is not JSON"
    if not isinstance(statement, dict):
        return "its statement is not a JSON object"
    return statement


def statement_sha256s(statement: Mapping[str, Any] | None) -> frozenset[str]:
    subjects = statement.get("subject") if isinstance(statement, Mapping) else None
    found = set()
    for subject in subjects if isinstance(subjects, list) else []:
        digest = subject.get("digest") if isinstance(subject, Mapping) else None
        value = digest.get("sha256") if isinstance(digest, Mapping) else None
        if isinstance(value, str):
            found.add(value.lower())
    return frozenset(found)


def attestation_path(wheel: Path) -> Path:
    """Where `pypi_attestations sign` writes the wheel's attestation."""
    return wheel.with_name(wheel.name + SUFFIX)


def subject_problem(filename: str, sha256: str, document: bytes) -> str | None:
    """Why `document` is not a PEP 740 publish attestation of exactly this file, or None.
    Pure."""
    from pypi_attestations import Attestation, AttestationType

    try:
        attestation = Attestation.model_validate_json(document)
    except HOSTILE as error:
        return reason(f"not a PEP 740 attestation ({error_text(error)})")
    statement = statement_of(attestation)
    if isinstance(statement, str):
        return statement
    kind = statement.get("predicateType")
    if kind != AttestationType.PYPI_PUBLISH_V1.value:
        return reason(f"predicate type {kind!r}, not {AttestationType.PYPI_PUBLISH_V1.value}")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return "its statement must name exactly one subject"
    name = subjects[0].get("name")
    digest = subjects[0].get("digest")
    got = digest.get("sha256") if isinstance(digest, dict) else None
    if name != filename:
        return reason(f"it attests {name!r}, not {filename}")
    if got != sha256:
        return f"it attests sha256 {str(got)[:12]}..., the wheel is {sha256[:12]}..."
    return None


def attestation_refusal(wheel: Path, sha256: str, *, repository: str | None = None) -> str | None:
    """Why the attestation beside `wheel` must not be sent with it; None when it matches or
    when there is none (the wheel is then uploaded without one). With `repository` (a GitHub
    release's owner/name, whose index links the attestation as the wheel's provenance), its
    certificate must name that repository too."""
    path = attestation_path(wheel)
    try:
        document = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path.name}: {error.strerror}"
    problem = subject_problem(wheel.name, sha256, document)
    if problem is None and repository is not None:
        signer = signer_of(document)
        if isinstance(signer, str):
            problem = signer
        elif signer.repository.lower() != repository.lower():
            problem = f"it was signed in {signer.repository}, not {repository}"
    if problem is None:
        return None
    remedy = "delete it and sign the wheel again: python -m pypi_attestations sign"
    return f"{path.name}: {problem} ({remedy})"


def github_provenance(wheel: Path) -> bytes | None:
    """The provenance object of the attestation beside `wheel`, published beside it on a
    GitHub release; None without a readable one (`attestation_refusal` says why)."""
    try:
        document = attestation_path(wheel).read_bytes()
    except OSError:
        return None
    signer = signer_of(document)
    if isinstance(signer, str):
        return None
    try:
        return provenance_object(document, signer)
    except HOSTILE:
        return None


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
    # as the attestation says, before its signature is checked; None: not a JSON object
    statement: Mapping[str, Any] | None
    certificate: bytes  # DER
    attestation: Attestation


def read_provenance(body: bytes) -> list[ProvenanceEntry] | str:
    """The attestations of a PEP 740 provenance object, or why it is not one."""
    from pypi_attestations import GitHubPublisher, Provenance

    try:
        provenance = Provenance.model_validate_json(body)
    except HOSTILE as error:
        return reason(f"unreadable provenance: {error_text(error)}")
    out: list[ProvenanceEntry] = []
    for bundle in provenance.attestation_bundles:
        publisher = bundle.publisher
        github = isinstance(publisher, GitHubPublisher)
        for attestation in bundle.attestations:
            statement = statement_of(attestation)
            out.append(
                ProvenanceEntry(
                    publisher_kind=str(publisher.kind),
                    repository=publisher.repository if github else None,  # type: ignore[union-attr]
                    workflow=publisher.workflow if github else None,  # type: ignore[union-attr]
                    statement=None if isinstance(statement, str) else statement,
                    certificate=attestation.verification_material.certificate,
                    attestation=attestation,
                )
            )
    return out


# --- The provenance object beside a GitHub-hosted wheel, which the index links to. ---


def signer_of(document: bytes) -> Identity | str:
    """Who signed a publish attestation, as its Fulcio certificate names it (source
    repository and workflow), or why it names nobody."""
    from pypi_attestations import Attestation

    try:
        attestation = Attestation.model_validate_json(document)
        identities = certificate_identities(attestation.verification_material.certificate)
    except HOSTILE as error:
        return reason(f"its certificate is unreadable ({error_text(error)})")
    if not identities:
        return "its certificate names no GitHub repository and workflow"
    return identities[0]


def provenance_object(document: bytes, signer: Identity) -> bytes:
    """The PEP 740 provenance object of one publish attestation: one bundle whose GitHub
    publisher is its signer, the workflow named by its file name as PyPI names it.
    Deterministic, so a re-run plans it as identical."""
    from pypi_attestations import Attestation, AttestationBundle, GitHubPublisher, Provenance

    attestation = Attestation.model_validate_json(document)
    publisher = GitHubPublisher(
        repository=signer.repository, workflow=signer.workflow.rsplit("/", 1)[-1]
    )
    provenance = Provenance(
        attestation_bundles=[AttestationBundle(publisher=publisher, attestations=[attestation])]
    )
    return provenance.model_dump_json().encode()


def check_attestation(attestation: Attestation, expected: ExpectedSigner) -> Checked:
    """A PEP 740 attestation's signature, certificate and log entry, verified against
    `expected` (release.provenance.signature)."""
    from pypi_attestations import AttestationError

    try:
        bundle = attestation.to_bundle()
    except SigstoreError as error:
        return Checked(problem=bundle_problem(error))
    except (AttestationError, *HOSTILE) as error:
        return Checked(problem=reason(f"not a Sigstore bundle ({error_text(error)})"))
    return check_bundle(bundle, expected)


def attests(checked: Checked, sha256: str) -> Checked:
    """`checked`, refused unless its verified statement names a file of `sha256`."""
    if checked.statement is None:
        return checked
    named = statement_sha256s(checked.statement)
    if sha256.lower() in named:
        return checked
    got = ", ".join(sorted(f"{other[:12]}..." for other in named)) or "no sha256"
    return Checked(problem=f"it attests {got}, not this file's sha256 {sha256[:12]}...")


def checked_provenance(body: bytes, sha256: str, expected: ExpectedSigner) -> list[Checked]:
    """Each attestation of a PEP 740 provenance object, verified against `expected` and
    this file's `sha256` (the publisher beside it is PyPI's word, not signed: the
    certificate's identity is what counts)."""
    entries = read_provenance(body)
    if isinstance(entries, str):
        return [Checked(problem=entries)]
    if not entries:
        return [Checked(problem="unreadable provenance: it holds no attestation")]
    return [attests(check_attestation(e.attestation, expected), sha256) for e in entries]


def provenance_problem(body: bytes, sha256: str) -> str | None:
    """Why `body` is not a PEP 740 provenance object that claims a file of `sha256`, or
    None: what the index needs to link it. Its signature is `checked_provenance`'s."""
    entries = read_provenance(body)
    if isinstance(entries, str):
        return entries
    if not any(sha256.lower() in statement_sha256s(e.statement) for e in entries):
        return f"it attests no file of sha256 {sha256[:12]}..."
    return None
