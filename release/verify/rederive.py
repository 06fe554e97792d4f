"""What a release published, re-derived from the destinations alone, for `release verify
--tag` and `--latest` (the scheduled URL watch): no dist/ and no record needed.

From the matrix it takes where each variant went, and the version the tag names from the
first destination that keeps releases by tag (GitHub); each destination's kind reads what it
holds of the tag's release (release.destinations: the GitHub release's assets and its
`release-manifest.json`, the sha256 of every file as it was built, published by `release
publish`; each simple index's files of the version). The kinds that read what was built go
first; where a release has no manifest, the destinations' digests stand in for it. The
result is the same `Published` a publish record gives, checked by release.verify.checks the
same way.
"""

from __future__ import annotations

from release.destinations.base import Rederiving
from release.destinations.reach import Reach
from release.destinations.registry import kind_of
from release.errors import ConfigError
from release.matrix import Matrix
from release.records.published import Published, PublishedCompanion, PublishedFile
from release.remote.httpclient import Client


def published_from_tag(matrix: Matrix, tag: str, *, reach: Reach, http: Client) -> Published:
    """What the release of `tag` published, read back from its destinations through
    `reach` (a GitHub client per API URL; its index base URL replaces the matrix's)."""
    project = matrix.project
    destinations = list(matrix.destinations.values())
    tagged = next((d for d in destinations if kind_of(d.kind).keeps_releases(d)), None)
    version = kind_of(tagged.kind).release_version(tagged, tag) if tagged else None
    if version is None:
        raise ConfigError(
            ["the matrix has no github destination to read a release from"],
            hint="verify with --dist DIR (the publish record) instead",
        )
    release = Rederiving(
        project=project.name,
        tag=tag,
        version=version,
        reach=reach,
        http=http,
    )
    files: list[PublishedFile] = []
    companions: list[PublishedCompanion] = []
    for destination in sorted(destinations, key=lambda d: not kind_of(d.kind).reads_first):
        found = kind_of(destination.kind).rederive(destination, release)
        files += found.files
        companions += found.companions
    return Published(
        project=project.name,
        version=str(release.version.public),
        files=tuple(files),
        companions=tuple(companions),
    )
