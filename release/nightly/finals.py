"""The latest final release on each destination of the release, asked read-only: what every
nightly version must sort above (release.nightly.promotion.order_problems).

PyPI (any simple index) says it by its project page (PEP 691 JSON or PEP 503 HTML: a page
that is not there is a project with no release yet); GitHub by the tags of its published
releases, read with the destination's tag template. A destination that cannot be asked is
named with why, never taken for one without releases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from release.credentials import secret_values
from release.errors import PublishError
from release.matrix import Cell, GithubDestination, Matrix, PypiDestination
from release.nightly.promotion import FinalRelease, latest_final
from release.publish.growth import tag_version
from release.remote import httpclient as http_edge
from release.remote.github import GithubClient
from release.remote.httpclient import Client, OriginAuth, index_logins
from release.remote.retry import RetryPolicy
from release.remote.simple_index import (
    ACCEPT,
    parse_project_page,
    project_page_url,
    versions_listed,
)

ASKING = RetryPolicy(attempts=3, initial_delay=1.0, total=60.0)


@dataclass(frozen=True, kw_only=True)
class Finals:
    releases: tuple[FinalRelease, ...]  # one per destination that has a final release
    not_asked: tuple[str, ...]  # "pypi: why", for each destination that could not be asked


def variant_of(cells: Sequence[Cell], version: Version) -> str:
    """What pip would install of `version` from the destination of `cells`."""
    cudas = ", ".join(dict.fromkeys(str(c.cuda) for c in cells))
    label = cells[0].local_label
    shown = f"{version.public}+{label}" if label else version.public
    return f"{shown} (the CUDA {cudas} variant)"


def read_finals(
    matrix: Matrix,
    *,
    environ: Mapping[str, str],
    github_api_url: str | None = None,
    repository_url: str | None = None,
    http: Client | None = None,
) -> Finals:
    """The latest final release on each pypi and github destination the release's cells go
    to (`matrix` is the release's, not a nightly's)."""
    by_destination: dict[str, list[Cell]] = {}
    for cell in matrix.cells:
        by_destination.setdefault(cell.destination.name, []).append(cell)
    releases: list[FinalRelease] = []
    not_asked: list[str] = []
    own = http is None
    client = http or http_edge.client(auth=_index_auth(matrix, environ, repository_url))
    try:
        for name, cells in by_destination.items():
            destination = cells[0].destination
            try:
                if isinstance(destination, PypiDestination):
                    found = _on_index(client, destination, matrix.project.name, environ)
                elif isinstance(destination, GithubDestination):
                    found = _on_github(destination, github_api_url, environ)
                else:
                    continue
            except PublishError as error:
                not_asked.append(f"{name}: {error.message}")
                continue
            if found is not None:
                releases.append(
                    FinalRelease(
                        destination=f"{name} ({destination.kind})",
                        version=found,
                        variant=variant_of(cells, found),
                    )
                )
    finally:
        if own:
            client.close()
    return Finals(releases=tuple(releases), not_asked=tuple(not_asked))


def _index_auth(matrix: Matrix, environ: Mapping[str, str], upload: str | None) -> OriginAuth:
    """The index credentials of each PyPI destination, for its index's origin (sent only
    when the index asks: a private index)."""
    pypi = [d for d in matrix.destinations.values() if isinstance(d, PypiDestination)]
    indexes = [(upload or d.repository_url, [d.index_url]) for d in pypi]
    return OriginAuth(basic=index_logins(environ, indexes))


def _on_index(
    client: Client, destination: PypiDestination, project: str, environ: Mapping[str, str]
) -> Version | None:
    page = project_page_url(destination.index_url, project)
    got = http_edge.fetch(
        client, page, keep=True, accept=ACCEPT, policy=ASKING, secrets=secret_values(environ)
    )
    if got.status == 404:
        return None  # no release of the project yet
    if not got.ok or got.body is None:
        raise PublishError(f"{page}: {got.error or f'HTTP {got.status}'}")
    try:
        listed = parse_project_page(got.body, got.content_type, page)
    except ValueError as error:
        raise PublishError(f"{page}: unreadable project page ({error})") from None
    return latest_final(versions_listed(listed))


def _on_github(
    destination: GithubDestination, api_url: str | None, environ: Mapping[str, str]
) -> Version | None:
    client = GithubClient.from_environment(
        api_url or destination.api_url,
        environ,
        policy=ASKING,
        command="release plan --channel nightly",
    )
    with client.session(f"{destination.repository} (its latest release)"):
        releases = client.published_releases(destination.repository)
    versions = [tag_version(destination.tag_template, r.tag) for r, _ in releases]
    return latest_final([v for v in versions if v is not None])


def finals_lines(finals: Finals) -> list[str]:
    """The report's lines on the version order a nightly must sort above."""
    if not finals.releases:
        return ["version order: no final release on the release's destinations yet"]
    return [f"latest final release on {f.destination}: {f.version.public}" for f in finals.releases]
