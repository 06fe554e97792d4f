"""One `release verify`: find what was published, then check it (release.verify.checks).

What was published comes from the publish record in `--dist` (checked against its
manifest), or, for `--tag` / `--latest`, from the destinations themselves
(release.verify.rederive): the GitHub clients and the index credentials that needs are
made here, from the environment the command hands in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from release.credentials import secret_values
from release.errors import ConfigError, IncompleteError, PublishError, VerifyError
from release.matrix import GithubDestination, Matrix, PypiDestination, load_matrix
from release.project import Naming
from release.provenance.signature import ExpectedSigner
from release.records.dist import load_dist
from release.records.published import RECORD_NAME, Published, read_record, with_overrides
from release.remote import httpclient as http
from release.remote.github import GithubClient, GithubUnreachable
from release.remote.github_model import GITHUB_API
from release.remote.httpclient import (
    Download,
    OriginAuth,
    index_logins,
)
from release.remote.retry import RetryPolicy
from release.verify.checks import Check, VerifyReport, VerifySettings, verify
from release.verify.provenance import (
    INTEGRITY_ACCEPT,
    ProvenanceSources,
    provenance_checks,
    provenance_required,
    unknown_destinations,
)
from release.verify.rederive import latest_tags, published_from_tag
from release.verify.served import served_checks

COMMAND = "release verify"


@dataclass(frozen=True, kw_only=True)
class VerifyTarget:
    """Which release to verify and where to read it: the publish record in `dist`, or, with
    `tags` or `latest`, the releases as the destinations of `matrix` hold them."""

    dist: Path = Path("dist")
    matrix: Path = Path("matrix.yaml")
    tags: tuple[str, ...] = ()
    latest: int | None = None  # the newest N published releases
    github_api_url: str | None = None  # replaces the matrix's GitHub API URLs
    index_base_url: str | None = None  # replaces the matrix's index URL
    overrides: Mapping[str, str] = field(default_factory=dict)  # --index-url NAME=URL

    @property
    def from_destinations(self) -> bool:
        return bool(self.tags or self.latest)


@dataclass(frozen=True, kw_only=True)
class VerifyOutcome:
    reports: tuple[VerifyReport, ...]  # one per release

    @property
    def report(self) -> VerifyReport:
        """Every release's checks in one report (the project of the first)."""
        return VerifyReport(
            project=self.reports[0].project,
            version=", ".join(r.version for r in self.reports),
            checks=tuple(c for r in self.reports for c in r.checks),
        )


def verify_release(
    target: VerifyTarget, settings: VerifySettings, environ: Mapping[str, str]
) -> VerifyOutcome:
    """Every check of every release `target` names; failed checks are in the reports, the
    caller decides what they mean."""
    releases = published_releases(target, environ)
    reports = []
    for release in releases:
        one = with_overrides(release, target.overrides)
        matrix = None
        if settings.provenance and target.matrix.is_file():
            matrix = load_matrix(target.matrix, named_statically)
        if matrix is not None:  # before any request: a wrong matrix is no partial report
            unknown_destinations(one, matrix.destinations)
        signer = expected_signer(matrix, one.version, settings) if matrix else None
        report = verify(one, environ, settings, signer=signer)
        report = replace(
            report, checks=report.checks + tuple(served_checks(one, matrix, environ, settings))
        )
        if settings.provenance:
            checks = provenance_of(one, matrix, target, settings, environ)
            report = replace(report, checks=report.checks + tuple(checks))
        reports.append(report)
    return VerifyOutcome(reports=tuple(reports))


def expected_signer(
    matrix: Matrix, version: str, settings: VerifySettings
) -> ExpectedSigner | None:
    """Who must have signed a release's attestations: the workflow of the matrix's (first)
    GitHub repository, run at the release's tag; without a GitHub destination, that of
    `provenance_repository` at `v` and the version, or None where none is named."""
    github = [d for d in matrix.destinations.values() if isinstance(d, GithubDestination)]
    if not github:
        if settings.provenance_repository is None:
            return None
        return ExpectedSigner(  # the caller's tag: `v` and the version (release init's trigger)
            repository=settings.provenance_repository,
            workflow=settings.provenance_workflow,
            ref=f"refs/tags/v{version}",
            signer_workflow=settings.provenance_signer_workflow,
        )
    try:
        ref: str | None = f"refs/tags/{github[0].tag(Version(version))}"
    except InvalidVersion:
        ref = None  # then any tag
    return ExpectedSigner(
        repository=github[0].repository,
        workflow=settings.provenance_workflow,
        ref=ref,
        signer_workflow=settings.provenance_signer_workflow,
    )


def provenance_of(
    published: Published,
    matrix: Matrix | None,
    target: VerifyTarget,
    settings: VerifySettings,
    environ: Mapping[str, str],
) -> list[Check]:
    """The provenance checks of one release: the matrix names this repository and the API
    of each GitHub destination; without a matrix nothing can be compared."""
    if matrix is None:
        detail = f"provenance not checked: no {target.matrix} names this repository (--matrix)"
        ok = not provenance_required(published, settings)
        subjects = [f.filename for f in published.files]
        subjects += [c.filename for c in published.companions]
        return [Check(subject=name, check="provenance", ok=ok, detail=detail) for name in subjects]
    clients = github_clients(matrix, api_url=target.github_api_url, environ=environ)
    github = {
        d.name: (clients[d.api_url], d.repository)
        for d in matrix.destinations.values()
        if isinstance(d, GithubDestination)
    }
    expected = expected_signer(matrix, published.version, settings)
    if expected is not None and not github:  # a PyPI-only project: its own repository's API
        api_url = target.github_api_url or environ.get("GITHUB_API_URL") or GITHUB_API
        signer = GithubClient.from_environment(api_url, environ, command=COMMAND)
        github[f"{expected.repository} (the signer)"] = (signer, expected.repository)
    sources = ProvenanceSources(
        expected=expected, github=github, destinations=frozenset(matrix.destinations)
    )
    policy = RetryPolicy(
        attempts=settings.attempts, initial_delay=settings.backoff_s, total=settings.deadline_s
    )
    with http.client(auth=index_auth(matrix, environ)) as client:

        def get(url: str) -> Download:
            return http.fetch(
                client, url, keep=True, accept=INTEGRITY_ACCEPT, policy=policy,
                secrets=secret_values(environ),
            )  # fmt: skip

        return provenance_checks(published, sources, settings, get)


def named_statically(provisional: Matrix, naming: Naming) -> tuple[str, Version]:
    """verify's matrix, read without asking the build backend: it reads the project's name
    and its destinations only (each release's version is its record's or its tag's), so a
    computed version stands in as 0; a computed name is an error."""
    if naming.name is None or naming.name.value is None:
        raise ConfigError(
            [f"{naming.unsaid(provisional.project.path)}: release verify reads the project's "
             "name from its files and asks no build backend"],
            hint="write the name as a literal in pyproject.toml's [project] or in setup.py",
        )  # fmt: skip
    return naming.name.value, Version("0")


def published_releases(target: VerifyTarget, environ: Mapping[str, str]) -> list[Published]:
    """What was published: the record in dist/, or each release named by tag or count."""
    if not target.from_destinations:
        manifest = load_dist(target.dist, missing_ok=True)
        return [read_record(target.dist / RECORD_NAME, manifest)]
    matrix = load_matrix(target.matrix, named_statically)
    clients = github_clients(matrix, api_url=target.github_api_url, environ=environ)
    try:
        tags = tags_to_verify(matrix, target, clients)
        with http.client(auth=index_auth(matrix, environ)) as client:
            return [
                published_from_tag(
                    matrix, tag, github=clients, http=client, index_base=target.index_base_url
                )
                for tag in dict.fromkeys(tags)
            ]
    except GithubUnreachable as error:
        raise IncompleteError(
            error.message.replace(" (done so far: nothing was changed)", ""),
            hint="nothing was verified; check the network (and --github-api-url), then run "
            "`release verify` again",
        ) from None
    except PublishError as error:  # a refusal or an answer of the wrong shape: not verified
        raise VerifyError(error.message, hint=error.hint) from None


def github_clients(
    matrix: Matrix, *, api_url: str | None, environ: Mapping[str, str]
) -> dict[str, GithubClient]:
    """A client per GitHub API URL of the matrix (keyed by the matrix's URL, talking to
    `api_url` where given), with the token of the environment if there is one."""
    return {
        d.api_url: GithubClient.from_environment(api_url or d.api_url, environ, command=COMMAND)
        for d in matrix.destinations.values()
        if isinstance(d, GithubDestination)
    }


def tags_to_verify(
    matrix: Matrix, target: VerifyTarget, clients: Mapping[str, GithubClient]
) -> list[str]:
    """The tags given, then those of the newest `latest` releases of the first GitHub
    destination; VerifyError when that leaves none."""
    tags = list(target.tags)
    if target.latest:
        first = next(
            (d for d in matrix.destinations.values() if isinstance(d, GithubDestination)), None
        )
        if first is None:
            raise ConfigError(["--latest: the matrix has no github destination"])
        tags += latest_tags(clients[first.api_url], first.repository, target.latest)
    if not tags:
        raise VerifyError("no published release to verify", hint="publish one first")
    return tags


def index_auth(matrix: Matrix, environ: Mapping[str, str]) -> OriginAuth:
    """The upload credentials of each PyPI destination, for its index's origin."""
    pypi = [d for d in matrix.destinations.values() if isinstance(d, PypiDestination)]
    indexes = [(d.repository_url, [d.index_url]) for d in pypi]
    return OriginAuth(basic=index_logins(environ, indexes))
