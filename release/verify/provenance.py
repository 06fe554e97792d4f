"""Provenance: each published file has an attestation of its sha256, signed through
Sigstore by this repository's release workflow at the release's tag.

Where it is read:
- GitHub-hosted files: GitHub's attestations API (`/repos/{repo}/attestations/sha256:{hex}`),
  whose items hold Sigstore bundles with a DSSE envelope around an in-toto statement;
- PyPI files: PyPI's integrity API (`/integrity/{project}/{version}/{file}/provenance`),
  a PEP 740 provenance object (read with pypi-attestations' models).

Each attestation is verified offline against the public-good trust root that
sigstore-python ships, and its certificate against the expected signer
(release.records.signature); only then is its statement read: its subject must hold the
file's sha256, and an SLSA predicate's workflow must be the expected one. A fetch that
fails is a failure, never "no provenance": an outage of GitHub or PyPI does not pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from packaging.utils import canonicalize_name

from release.errors import PublishError
from release.records.attestation import attests, checked_provenance, repository_of_url
from release.records.published import Published, PublishedFile
from release.records.signature import Checked, ExpectedSigner, check_bundle_json
from release.remote.github import GithubClient
from release.remote.httpclient import Download, origin_of
from release.verify.checks import (
    NO_SIGNER,
    RELEASE_WORKFLOW,
    Check,
    VerifySettings,
    provenance_verdict,
)

__all__ = ["RELEASE_WORKFLOW", "ExpectedSigner", "provenance_check", "provenance_checks"]

INTEGRITY_ACCEPT = "application/vnd.pypi.integrity.v1+json"


# --- Judging what the destinations hold (pure but for the signature check's CPU). ---


def predicate_workflow(statement: Mapping[str, Any]) -> tuple[str, str] | None:
    """SLSA v1 GitHub Actions build type: buildDefinition.externalParameters.workflow, as
    (owner/name, path)."""
    node: Any = statement.get("predicate")
    for key in ("buildDefinition", "externalParameters", "workflow"):
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return None
    repository, path = node.get("repository"), node.get("path")
    if not isinstance(repository, str) or not isinstance(path, str):
        return None
    return repository_of_url(repository), path


def check_github_attestation(
    item: Mapping[str, Any], sha256: str, expected: ExpectedSigner
) -> Checked:
    """One item of GitHub's attestations API, `{"bundle": <Sigstore bundle>, ...}`: its
    signature and signer verified, then its statement read."""
    bundle = item.get("bundle")
    if not isinstance(bundle, Mapping):
        return Checked(problem="unreadable bundle: the item holds no bundle object")
    checked = attests(check_bundle_json(bundle, expected), sha256)
    named = predicate_workflow(checked.statement) if checked.statement is not None else None
    if named is not None and (
        named[0].lower() != expected.repository.lower() or named[1] != expected.workflow
    ):
        return Checked(problem=f"its SLSA predicate names the workflow {named[0]} {named[1]}")
    return checked


def provenance_check(
    file: PublishedFile,
    checked: Sequence[Checked] | None,
    *,
    required: bool,
    where: str,
) -> Check:
    """One file's provenance check from its attestations, each already checked
    (release.verify.checks.provenance_verdict says what counts)."""
    ok, detail = provenance_verdict(checked, required=required)
    return Check(subject=file.filename, check="provenance", ok=ok, detail=detail, url=where)


def integrity_url(file: PublishedFile, project: str, version: str) -> str:
    """PyPI's integrity API for a file, on the origin of the index that lists it."""
    base = origin_of(file.index_url or file.url)
    name = canonicalize_name(project)
    return f"{base}/integrity/{name}/{quote(version)}/{quote(file.filename)}/provenance"


# --- Asking the destinations. ---


@dataclass(frozen=True, kw_only=True)
class ProvenanceSources:
    """Where to ask and what to expect: who must have signed (None where no matrix names
    this repository), and per GitHub destination name its client and repository."""

    expected: ExpectedSigner | None
    github: Mapping[str, tuple[GithubClient, str]]


def provenance_checks(
    published: Published,
    sources: ProvenanceSources,
    settings: VerifySettings,
    get: Callable[[str], Download],
) -> list[Check]:
    """A provenance check per published file. `get` fetches a URL once (no retries for
    404: PyPI's integrity API answers 404 where there is no provenance)."""
    required = settings.require_provenance
    checks = []
    for file in published.files:
        if file.kind not in ("github", "pypi"):
            continue
        if sources.expected is None:
            checks.append(_not_checked(file, NO_SIGNER, required=required))
            continue
        if file.kind == "github":
            if file.destination not in sources.github:
                continue
            found = _github_attestations(file, sources, sources.expected, required=required)
        else:
            found = _pypi_provenance(file, published, sources.expected, get)
        if isinstance(found, Check):
            checks.append(found)
            continue
        checked, where = found
        checks.append(provenance_check(file, checked, required=required, where=where))
    return checks


Found = Check | tuple[list[Checked] | None, str]  # a check already, or what was found where


def _github_attestations(
    file: PublishedFile, sources: ProvenanceSources, expected: ExpectedSigner, *, required: bool
) -> Found:
    client, repository = sources.github[file.destination]
    if f"/{repository}/releases/download/".lower() not in file.url.lower():
        # the matrix at hand is not the one this release was published with
        detail = (
            f"provenance not checked: {file.url} is no download of {repository} "
            "(give --matrix the matrix it was published with)"
        )
        return _not_checked(file, detail, required=required, url=file.url)
    where = f"{client.api_url}/repos/{repository}/attestations/sha256:{file.sha256}"
    try:
        with client.session(f"{repository} attestations"):
            items = client.attestations(repository, file.sha256)
    except PublishError as error:
        return _unanswered(file, where, error.message)
    if items is None:
        return None, where
    return [check_github_attestation(i, file.sha256, expected) for i in items], where


def _pypi_provenance(
    file: PublishedFile,
    published: Published,
    expected: ExpectedSigner,
    get: Callable[[str], Download],
) -> Found:
    where = integrity_url(file, published.project, published.version)
    got = get(where)
    if got.status == 404:
        return None, where
    if not got.ok or got.body is None:
        return _unanswered(file, where, got.error or f"HTTP {got.status}")
    return checked_provenance(got.body, file.sha256, expected), where


def _not_checked(
    file: PublishedFile, detail: str, *, required: bool, url: str | None = None
) -> Check:
    return Check(subject=file.filename, check="provenance", ok=not required, detail=detail, url=url)


def _unanswered(file: PublishedFile, where: str, detail: str) -> Check:
    return Check(
        subject=file.filename,
        check="provenance",
        ok=False,
        detail=f"provenance not read: {detail}",
        url=where,
    )
