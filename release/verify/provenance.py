"""Provenance: each published file has an attestation for its sha256 that names this
repository and the release workflow.

Where it is read:
- GitHub-hosted files: GitHub's attestations API (`/repos/{repo}/attestations/sha256:{hex}`),
  whose items hold Sigstore bundles with a DSSE envelope around an in-toto statement;
- PyPI files: PyPI's integrity API (`/integrity/{project}/{version}/{file}/provenance`),
  a PEP 740 provenance object (read with pypi-attestations' models).

What is checked here, offline: the statement's subject holds the file's sha256, and the
identity (the SLSA predicate's workflow, the Fulcio certificate's source repository and
build signer extensions, or PyPI's trusted publisher) is this repository and workflow.
The Sigstore signature and its certificate chain are not checked: that needs Sigstore's
trust root (public-good via TUF, or GitHub's own for private repositories), which is not
offline; every ok detail says so.

sigstore's `Bundle` refuses bundles without a transparency-log entry, and GitHub's Sigstore
instance (private repositories) issues exactly those (RFC 3161 timestamps instead), so the
GitHub bundle is read here: three JSON fields and a certificate parsed by `cryptography`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from packaging.utils import canonicalize_name

from release.errors import PublishError
from release.records.attestation import (
    Identity,
    certificate_identities,
    read_provenance,
    repository_of_url,
    statement_sha256s,
)
from release.records.published import Published, PublishedFile
from release.remote.github import GithubClient
from release.remote.httpclient import Download, origin_of
from release.verify.checks import RELEASE_WORKFLOW, Check, VerifySettings

__all__ = ["RELEASE_WORKFLOW", "Attested", "Identity", "provenance_check", "provenance_checks"]

INTEGRITY_ACCEPT = "application/vnd.pypi.integrity.v1+json"
NOT_CHECKED = "signature not checked offline"


@dataclass(frozen=True, kw_only=True)
class Attested:
    """One attestation as read: the sha256s its statement names and who it says made it
    (each place that names an identity: the predicate, the certificate, the publisher)."""

    sha256s: frozenset[str]
    identities: tuple[Identity, ...]
    problem: str | None = None  # why it could not be read


# --- Reading what the destinations hold (pure: JSON in, Attested out). ---


def predicate_identities(statement: Mapping[str, Any]) -> list[Identity]:
    """SLSA v1 GitHub Actions build type: buildDefinition.externalParameters.workflow."""
    predicate = statement.get("predicate")
    node: Any = predicate
    for key in ("buildDefinition", "externalParameters", "workflow"):
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return []
    repository, path = node.get("repository"), node.get("path")
    if not isinstance(repository, str) or not isinstance(path, str):
        return []
    return [Identity(repository=repository_of_url(repository), workflow=path)]


def read_github_attestation(item: Mapping[str, Any]) -> Attested:
    """One item of GitHub's attestations API: `{"bundle": <Sigstore bundle>, ...}`."""
    try:
        bundle = item["bundle"]
        envelope = bundle["dsseEnvelope"]
        if envelope.get("payloadType") != "application/vnd.in-toto+json":
            raise ValueError(f"payloadType {envelope.get('payloadType')!r}")
        statement = json.loads(base64.b64decode(envelope["payload"], validate=True))
        material = bundle["verificationMaterial"]
        chain = material.get("x509CertificateChain")
        raw = chain["certificates"][0]["rawBytes"] if chain else material["certificate"]["rawBytes"]
        der = base64.b64decode(raw, validate=True)
        identities = [*predicate_identities(statement), *certificate_identities(der)]
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as error:
        return Attested(sha256s=frozenset(), identities=(), problem=f"unreadable bundle: {error}")
    return Attested(sha256s=statement_sha256s(statement), identities=tuple(identities))


def read_pypi_provenance(body: bytes) -> list[Attested]:
    """A PEP 740 provenance object: per attestation, its bundle's publisher and what its
    statement and certificate name."""
    entries = read_provenance(body)
    if isinstance(entries, str):
        return [Attested(sha256s=frozenset(), identities=(), problem=entries)]
    out: list[Attested] = []
    for entry in entries:
        if entry.repository is not None and entry.workflow is not None:
            workflow = entry.workflow
            path = workflow if "/" in workflow else f".github/workflows/{workflow}"
            named = [Identity(repository=entry.repository, workflow=path)]
        else:
            named = [Identity(repository=f"a {entry.publisher_kind} publisher", workflow="-")]
        identities = [*named, *certificate_identities(entry.certificate)]
        out.append(
            Attested(sha256s=statement_sha256s(entry.statement), identities=tuple(identities))
        )
    return out


# --- The verdict (pure). ---


def provenance_check(
    file: PublishedFile,
    attested: Sequence[Attested] | None,
    expected: Identity | None,
    *,
    required: bool,
    where: str,
) -> Check:
    """One file's provenance: ok when an attestation of its sha256 names `expected` in every
    place it names anyone; "no provenance" (a failure only when `required`); a failure when
    the attestations of its sha256 name another repository or workflow."""

    def result(ok: bool, detail: str) -> Check:
        return Check(subject=file.filename, check="provenance", ok=ok, detail=detail, url=where)

    about = [a for a in attested or () if file.sha256 in a.sha256s]
    if not about:
        problems = [a.problem for a in attested or () if a.problem]
        if problems:
            return result(False, problems[0])
        detail = "no provenance" if not attested else "no provenance for this sha256"
        return result(not required, detail)
    named = [a for a in about if a.identities]
    if not named:
        return result(False, "provenance names no repository or workflow")
    if expected is None:
        return result(True, f"provenance: {named[0].identities[0]} ({NOT_CHECKED})")
    for one in named:
        if all(identity.matches(expected) for identity in one.identities):
            return result(True, f"provenance: {expected} ({NOT_CHECKED})")
    others = _distinct(i for a in named for i in a.identities if not i.matches(expected))
    return result(
        False,
        "provenance names another repository/workflow: "
        + ", ".join(str(i) for i in others)
        + f" (expected {expected})",
    )


def _distinct(items: Iterable[Identity]) -> list[Identity]:
    return list(dict.fromkeys(items))


def integrity_url(file: PublishedFile, project: str, version: str) -> str:
    """PyPI's integrity API for a file, on the origin of the index that lists it."""
    base = origin_of(file.index_url or file.url)
    name = canonicalize_name(project)
    return f"{base}/integrity/{name}/{quote(version)}/{quote(file.filename)}/provenance"


# --- Asking the destinations. ---


@dataclass(frozen=True, kw_only=True)
class ProvenanceSources:
    """Where to ask: this repository (owner/name: the matrix's GitHub destination, which an
    attestation must name), and per GitHub destination name its client and repository."""

    repository: str | None
    github: Mapping[str, tuple[GithubClient, str]]


def provenance_checks(
    published: Published,
    sources: ProvenanceSources,
    settings: VerifySettings,
    get: Callable[[str], Download],
) -> list[Check]:
    """A provenance check per published file. `get` fetches a URL once (no retries for
    404: PyPI's integrity API answers 404 where there is no provenance)."""
    expected = (
        Identity(repository=sources.repository, workflow=settings.provenance_workflow)
        if sources.repository
        else None
    )
    required = settings.require_provenance
    checks = []
    for file in published.files:
        if file.kind == "github" and file.destination in sources.github:
            client, repository = sources.github[file.destination]
            if f"/{repository}/releases/download/".lower() not in file.url.lower():
                # the matrix at hand is not the one this release was published with
                checks.append(
                    Check(
                        subject=file.filename,
                        check="provenance",
                        ok=not required,
                        detail=f"provenance not checked: {file.url} is no download of "
                        f"{repository} (give --matrix the matrix it was published with)",
                        url=file.url,
                    )
                )
                continue
            where = f"{client.api_url}/repos/{repository}/attestations/sha256:{file.sha256}"
            try:
                with client.session(f"{repository} attestations"):
                    items = client.attestations(repository, file.sha256)
            except PublishError as error:
                checks.append(_unanswered(file, where, error.message))
                continue
            attested = None if items is None else [read_github_attestation(i) for i in items]
        elif file.kind == "pypi":
            where = integrity_url(file, published.project, published.version)
            got = get(where)
            if got.status == 404:
                attested = None
            elif not got.ok or got.body is None:
                detail = got.error or f"HTTP {got.status}"
                checks.append(_unanswered(file, where, detail))
                continue
            else:
                attested = read_pypi_provenance(got.body)
        else:
            continue
        checks.append(provenance_check(file, attested, expected, required=required, where=where))
    return checks


def _unanswered(file: PublishedFile, where: str, detail: str) -> Check:
    return Check(
        subject=file.filename,
        check="provenance",
        ok=False,
        detail=f"provenance not read: {detail}",
        url=where,
    )
