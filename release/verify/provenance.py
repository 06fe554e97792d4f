"""Provenance: each published file has an attestation of its sha256, signed through
Sigstore by this repository's release workflow at the release's tag.

Where it is read:
- GitHub-hosted files and the companions on the Release (PEP 658 `.metadata`, NCCL files,
  `release-manifest.json`, `.provenance`): GitHub's attestations API
  (`/repos/{repo}/attestations/sha256:{hex}`), whose items hold Sigstore bundles with a
  DSSE envelope around an in-toto statement (the publish job's build provenance);
- PyPI files: PyPI's integrity API (`/integrity/{project}/{version}/{file}/provenance`),
  a PEP 740 provenance object (read with pypi-attestations' models); where PyPI has none
  (an upload with a token: PyPI takes attestations only from trusted publishing), the
  GitHub build provenance of the same sha256, and the check says which it used.

Each attestation is verified offline against the public-good trust root that
sigstore-python ships, and its certificate against the expected signer
(release.provenance.signature); only then is its statement read: its subject must hold the
file's sha256, and an SLSA predicate's workflow must be the expected one. A fetch that
fails is a failure, never "no provenance": an outage of GitHub or PyPI does not pass.
Every file of the publish record is checked: one whose destination the matrix does not
name is a ConfigError, never a skip.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from packaging.utils import canonicalize_name

from release.destinations.base import ProvenanceRoute
from release.destinations.registry import find_kind
from release.errors import ConfigError, PublishError
from release.provenance.attestation import attests, checked_provenance, repository_of_url
from release.provenance.signature import Checked, ExpectedSigner, check_bundle_json, reason
from release.records.published import SDIST_PURPOSE, Published, PublishedFile
from release.remote.github import GithubClient
from release.remote.httpclient import Download, origin_of
from release.verify.checks import (
    NO_SIGNER,
    Check,
    VerifySettings,
    provenance_verdict,
    takes_sdist,
)

__all__ = ["ExpectedSigner", "provenance_check", "provenance_checks"]

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


def check_github_attestation(item: object, sha256: str, expected: ExpectedSigner) -> Checked:
    """One item of GitHub's attestations API, `{"bundle": <Sigstore bundle>, ...}`: its
    signature and signer verified, then its statement read. Anything else is refused."""
    if not isinstance(item, Mapping):
        return Checked(problem="unreadable attestation: the item is not an object")
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
    filename: str,
    checked: Sequence[Checked] | None,
    *,
    required: bool,
    where: str,
    route: str | None = None,
) -> Check:
    """One file's provenance check from its attestations, each already checked
    (release.verify.checks.provenance_verdict says what counts); `route` says where they
    were read, where a file has more than one."""
    ok, detail = provenance_verdict(checked, required=required)
    if route is not None and checked:
        detail = f"{detail} [{route}]"
    return Check(subject=filename, check="provenance", ok=ok, detail=detail, url=where)


def integrity_url(file: PublishedFile, project: str, version: str) -> str:
    """PyPI's integrity API for a file, on the origin of the index that lists it."""
    base = origin_of(file.index_url or file.url)
    name = canonicalize_name(project)
    return f"{base}/integrity/{name}/{quote(version)}/{quote(file.filename)}/provenance"


# --- Asking the destinations. ---


@dataclass(frozen=True, kw_only=True)
class ProvenanceSources:
    """Where to ask and what to expect: who must have signed (None where no matrix names
    this repository), and per destination name whose files' attestations GitHub holds its
    client and repository (its kind's `attestation_source`)."""

    expected: ExpectedSigner | None
    github: Mapping[str, tuple[GithubClient, str]]
    destinations: frozenset[str] = frozenset()  # every destination name of the matrix


def unknown_destinations(published: Published, names: Collection[str]) -> None:
    """ConfigError naming each record entry whose destination the matrix does not name: its
    provenance could not be checked against the right repository, and is never skipped."""
    problems = [
        f"{file.filename}: its destination {file.destination!r} is not in the matrix "
        f"(it names {', '.join(sorted(names)) or 'none'})"
        for file in published.files
        if file.destination not in names
    ]
    if problems:
        raise ConfigError(
            problems,
            hint="give --matrix the matrix.yaml this release was published with",
        )


def provenance_checks(
    published: Published,
    sources: ProvenanceSources,
    settings: VerifySettings,
    get: Callable[[str], Download],
) -> list[Check]:
    """A provenance check per published file and companion. Provenance is required where
    `--require-provenance` says so, and of every file and companion of a release whose
    record says a file of it was attested: that file was signed in the publish job, which
    attests every file it ships. `get` fetches a URL once (no retries for 404: PyPI's
    integrity API answers 404 where there is no provenance)."""
    unknown_destinations(published, sources.destinations)
    required = provenance_required(published, settings)
    asking = _Asking(published=published, sources=sources, get=get, required=required)
    checks = [_file_check(file, asking) for file in published.files]
    for companion in published.companions:
        subject = Subject(companion.filename, companion.sha256, companion.url)
        if companion.purpose == SDIST_PURPOSE:  # a PyPI file: PEP 740 there, else GitHub's
            checks.append(_sdist_check(subject, asking))
            continue
        checks.append(_companion_check(subject, sources, required=required))
    return checks


@dataclass(frozen=True, kw_only=True)
class _Asking:
    """What each check of one release asks with: its record, where to ask and what to
    expect, how a URL is fetched, and whether finding none fails."""

    published: Published
    sources: ProvenanceSources
    get: Callable[[str], Download]
    required: bool


def _sdist_check(subject: Subject, asking: _Asking) -> Check:
    """The sdist, on the default variant's PyPI beside its wheels: read as they are."""
    files = asking.published.files
    pypi = next((f for f in files if takes_sdist(f)), None)
    if asking.sources.expected is None or pypi is None:
        return _not_checked(subject, NO_SIGNER, required=asking.required, url=subject.url)
    file = replace(pypi, filename=subject.filename, sha256=subject.sha256, url=subject.url)
    return _pypi_check(subject, file, asking)


def provenance_required(published: Published, settings: VerifySettings) -> bool:
    """Whether "no provenance" fails: asked for, or the record says the release was attested."""
    return settings.require_provenance or any(f.attested for f in published.files)


@dataclass(frozen=True)
class Subject:
    """What is attested: a file's name, sha256 and URL."""

    filename: str
    sha256: str
    url: str


def _file_check(file: PublishedFile, asking: _Asking) -> Check:
    subject = Subject(file.filename, file.sha256, file.url)
    expected, required = asking.sources.expected, asking.required
    if expected is None:
        return _not_checked(subject, NO_SIGNER, required=required)
    kind = find_kind(file.kind)
    route = kind.attestations if kind is not None else None
    if route is ProvenanceRoute.GITHUB:
        client, repository = asking.sources.github[file.destination]
        return _github_check(subject, client, repository, expected, required=required)
    if route is ProvenanceRoute.PYPI:
        return _pypi_check(subject, file, asking)
    detail = f"provenance not checked: a {file.kind} destination serves no attestations"
    return _not_checked(subject, detail, required=required, url=file.url)


def _companion_check(subject: Subject, sources: ProvenanceSources, *, required: bool) -> Check:
    if sources.expected is None:
        return _not_checked(subject, NO_SIGNER, required=required)
    for client, repository in sources.github.values():
        if _downloads_of(subject.url, repository):
            return _github_check(subject, client, repository, sources.expected, required=required)
    detail = (
        f"provenance not checked: {subject.url} is no download of a GitHub destination of the "
        "matrix (give --matrix the matrix it was published with)"
    )
    return _not_checked(subject, detail, required=required, url=subject.url)


def _downloads_of(url: str, repository: str) -> bool:
    return f"/{repository}/releases/download/".lower() in url.lower()


def _github_check(
    subject: Subject,
    client: GithubClient,
    repository: str,
    expected: ExpectedSigner,
    *,
    required: bool,
) -> Check:
    if not _downloads_of(subject.url, repository):
        # the matrix at hand is not the one this release was published with
        detail = (
            f"provenance not checked: {subject.url} is no download of {repository} "
            "(give --matrix the matrix it was published with)"
        )
        return _not_checked(subject, detail, required=required, url=subject.url)
    found = _github_attestations(subject, client, repository, expected)
    if isinstance(found, Check):
        return found
    checked, where = found
    return provenance_check(subject.filename, checked, required=required, where=where)


Found = Check | tuple[list[Checked] | None, str]  # a check already, or what was found where


def _github_attestations(
    subject: Subject, client: GithubClient, repository: str, expected: ExpectedSigner
) -> Found:
    where = f"{client.api_url}/repos/{repository}/attestations/sha256:{subject.sha256}"
    try:
        with client.session(f"{repository} attestations"):
            items = client.attestations(repository, subject.sha256)
    except PublishError as error:
        return _unanswered(subject, where, error.message)
    if items is None:
        return None, where
    return [check_github_attestation(i, subject.sha256, expected) for i in items], where


PEP740_ROUTE = "PEP 740 on PyPI"
GITHUB_ROUTE = "GitHub build provenance (PyPI serves no PEP 740 attestation of it)"


def _pypi_check(subject: Subject, file: PublishedFile, asking: _Asking) -> Check:
    """PEP 740 from PyPI's integrity API; where PyPI has none (a token upload), the GitHub
    build-provenance attestation the publish job made of the same sha256, in the signer's
    repository, verified alike. The detail says which route it took."""
    sources, required = asking.sources, asking.required
    assert sources.expected is not None  # noqa: S101  # _file_check returned before
    where = integrity_url(file, asking.published.project, asking.published.version)
    got = asking.get(where)
    if got.status != 404:
        if not got.ok or got.body is None:
            return _unanswered(subject, where, got.error or f"HTTP {got.status}")
        checked = checked_provenance(got.body, subject.sha256, sources.expected)
        return provenance_check(
            subject.filename, checked, required=required, where=where, route=PEP740_ROUTE
        )
    github = [
        pair for pair in sources.github.values()
        if pair[1].lower() == sources.expected.repository.lower()
    ]  # fmt: skip
    if not github:
        return provenance_check(subject.filename, None, required=required, where=where)
    client, repository = github[0]
    found = _github_attestations(subject, client, repository, sources.expected)
    if isinstance(found, Check):
        if required:
            return found
        # PyPI holds none, none is required, and the second route could not be read: an
        # outage of it is said, and is no failure of a release that never was attested
        return replace(found, ok=True, detail=f"no provenance; {found.detail}")
    checked_github, where_github = found
    if checked_github is None:  # neither route holds one: name the one PyPI files use
        return provenance_check(subject.filename, None, required=required, where=where)
    return provenance_check(
        subject.filename, checked_github, required=required, where=where_github, route=GITHUB_ROUTE
    )


def _not_checked(subject: Subject, detail: str, *, required: bool, url: str | None = None) -> Check:
    return Check(
        subject=subject.filename, check="provenance", ok=not required, detail=detail, url=url
    )


def _unanswered(subject: Subject, where: str, detail: str) -> Check:
    return Check(
        subject=subject.filename,
        check="provenance",
        ok=False,
        detail=f"provenance not read: {reason(detail)}",
        url=where,
    )
