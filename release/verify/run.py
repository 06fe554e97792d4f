"""One `release verify`: find what was published, then check it (release.verify.checks).

What was published comes from the publish record in `--dist` (checked against its
manifest), or, for `--tag` / `--latest`, from the destinations themselves
(release.verify.rederive). Every client and credential comes from the command's Reach
(release.destinations.reach), built once from its environment.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from release.destinations.reach import Reach
from release.destinations.registry import index_auth, kind_of
from release.errors import ConfigError, IncompleteError, PublishError, VerifyError
from release.matrix import Matrix, load_matrix
from release.project import Naming
from release.provenance.signature import ExpectedSigner
from release.records.dist import load_dist
from release.records.published import (
    RECORD_NAME,
    Published,
    check_overrides,
    read_record,
    with_overrides,
)
from release.remote.github import GithubClient, GithubUnreachable
from release.remote.httpclient import Client, Download, fetch
from release.remote.retry import RetryPolicy
from release.verify.checks import Check, VerifyReport, VerifySettings, verify
from release.verify.provenance import (
    INTEGRITY_ACCEPT,
    ProvenanceSources,
    provenance_checks,
    provenance_required,
    unknown_destinations,
)
from release.verify.rederive import published_from_tag
from release.verify.served import served_checks


@dataclass(frozen=True, kw_only=True)
class VerifyTarget:
    """Which release to verify and where to read it: the publish record in `dist`, or, with
    `tags` or `latest`, the releases as the destinations of `matrix` hold them."""

    dist: Path = Path("dist")
    matrix: Path = Path("matrix.yaml")
    matrix_given: bool = False  # named on the command line (--matrix), not found by default
    tags: tuple[str, ...] = ()
    latest: int | None = None  # the newest N published releases
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


def verify_release(target: VerifyTarget, settings: VerifySettings, reach: Reach) -> VerifyOutcome:
    """Every check of every release `target` names, reaching the destinations through
    `reach`; failed checks are in the reports, the caller decides what they mean. The
    matrix is read once, and one client with its indexes' credentials serves the reads of
    the destinations and of the attestations."""
    with ExitStack() as stack:
        matrix = load_matrix(target.matrix, named_statically) if target.from_destinations else None
        http = _index_client(matrix, reach, stack)
        releases = published_releases(target, reach, matrix=matrix, http=http)
        held = settings.provenance or target.matrix_given
        if matrix is None and held and target.matrix.is_file():
            # what the release is held to: each variant the matrix names, and provenance
            # (with --no-provenance, a matrix named on the command line only)
            matrix = load_matrix(target.matrix, named_statically)
            http = _index_client(matrix, reach, stack)
        check_overrides(target.overrides, releases)
        reports = []
        for release in releases:
            one = with_overrides(release, target.overrides)
            if matrix is not None:  # before any request: a wrong matrix is no partial report
                if canonicalize_name(matrix.project.name) != canonicalize_name(one.project):
                    raise ConfigError(
                        [
                            f"{target.matrix} releases {matrix.project.name}, and the release "
                            f"verified is {one.project} {one.version}"
                        ],
                        hint="give --matrix the matrix.yaml this release was published with",
                    )
                unknown_destinations(one, matrix.destinations)
            signer = (
                expected_signer(matrix, one.version, settings)
                if matrix and settings.provenance
                else None
            )
            started = time.monotonic()
            report = verify(one, reach, settings, signer=signer)
            # the second look gets what is left of the release's --timeout, not one of its own
            left = max(settings.deadline_s - (time.monotonic() - started), 0.001)
            served = served_checks(one, matrix, reach, replace(settings, deadline_s=left))
            report = replace(report, checks=report.checks + tuple(served))
            if settings.provenance:
                checks = provenance_of(one, matrix, target, settings, reach, http=http)
                report = replace(report, checks=report.checks + tuple(checks))
            reports.append(report)
    return VerifyOutcome(reports=tuple(reports))


def _index_client(matrix: Matrix | None, reach: Reach, stack: ExitStack) -> Client | None:
    """One client with the credentials of the matrix's indexes, closed with `stack`."""
    if matrix is None:
        return None
    return stack.enter_context(reach.http(index_auth(matrix.destinations.values(), reach)))


def expected_signer(
    matrix: Matrix, version: str, settings: VerifySettings
) -> ExpectedSigner | None:
    """Who must have signed a release's attestations: the workflow of the repository of the
    matrix's first destination that names one (GitHub), run at the release's tag; without
    one, that of `provenance_repository` at `v` and the version, or None where none is
    named."""
    named = (kind_of(d.kind).signer(d, version) for d in matrix.destinations.values())
    found = next((signer for signer in named if signer is not None), None)
    if found is None:
        if settings.provenance_repository is None:
            return None
        return ExpectedSigner(  # the caller's tag: `v` and the version (release init's trigger)
            repository=settings.provenance_repository,
            workflow=settings.provenance_workflow,
            ref=f"refs/tags/v{version}",
            signer_workflow=settings.provenance_signer_workflow,
        )
    repository, ref = found
    return ExpectedSigner(
        repository=repository,
        workflow=settings.provenance_workflow,
        ref=ref,
        signer_workflow=settings.provenance_signer_workflow,
    )


def provenance_of(
    published: Published,
    matrix: Matrix | None,
    target: VerifyTarget,
    settings: VerifySettings,
    reach: Reach,
    *,
    http: Client | None = None,
) -> list[Check]:
    """The provenance checks of one release: the matrix names this repository and the API
    of each GitHub destination; without a matrix nothing can be compared. `http` is the
    run's client with the indexes' credentials (one is made where none is given)."""
    if matrix is None:
        detail = f"provenance not checked: no {target.matrix} names this repository (--matrix)"
        ok = not provenance_required(published, settings)
        subjects = [f.filename for f in published.files]
        subjects += [c.filename for c in published.companions]
        return [Check(subject=name, check="provenance", ok=ok, detail=detail) for name in subjects]
    github: dict[str, tuple[GithubClient, str]] = {
        d.name: source
        for d in matrix.destinations.values()
        if (source := kind_of(d.kind).attestation_source(d, reach)) is not None
    }
    expected = expected_signer(matrix, published.version, settings)
    if expected is not None and not github:  # a PyPI-only project: its own repository's API
        github[f"{expected.repository} (the signer)"] = (reach.signer_github(), expected.repository)
    sources = ProvenanceSources(
        expected=expected, github=github, destinations=frozenset(matrix.destinations)
    )
    policy = RetryPolicy(
        attempts=settings.attempts, initial_delay=settings.backoff_s, total=settings.deadline_s
    )
    with ExitStack() as stack:
        client = http or _index_client(matrix, reach, stack)
        assert client is not None  # noqa: S101  # a matrix makes one

        def get(url: str) -> Download:
            return fetch(
                client, url, keep=True, accept=INTEGRITY_ACCEPT, policy=policy,
                secrets=reach.secrets,
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


def published_releases(
    target: VerifyTarget,
    reach: Reach,
    *,
    matrix: Matrix | None = None,
    http: Client | None = None,
) -> list[Published]:
    """What was published: the record in dist/, or each release named by tag or count
    (read with `matrix` and `http`, the run's, where given)."""
    if not target.from_destinations:
        manifest = load_dist(target.dist, missing_ok=True)
        return [read_record(target.dist / RECORD_NAME, manifest)]
    matrix = matrix or load_matrix(target.matrix, named_statically)
    try:
        tags = tags_to_verify(matrix, target, reach)
        with ExitStack() as stack:
            client = http or _index_client(matrix, reach, stack)
            assert client is not None  # noqa: S101  # a matrix makes one
            return [
                published_from_tag(matrix, tag, reach=reach, http=client)
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


def tags_to_verify(matrix: Matrix, target: VerifyTarget, reach: Reach) -> list[str]:
    """The tags given, then those of the newest `latest` releases of the first destination
    that tags its releases (GitHub); VerifyError when that leaves none."""
    tags = list(target.tags)
    if target.latest:
        found = (
            kind_of(d.kind).latest_tags(d, reach, target.latest)
            for d in matrix.destinations.values()
            if kind_of(d.kind).keeps_releases(d)
        )
        latest = next(found, None)
        if latest is None:
            raise ConfigError(["--latest: the matrix has no github destination"])
        tags += latest
    if not tags:
        raise VerifyError("no published release to verify", hint="publish one first")
    return tags
