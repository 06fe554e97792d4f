"""What a release published, re-derived from the destinations alone, for `release verify
--tag` and `--latest` (the scheduled URL watch): no dist/ and no record needed.

From the matrix it takes where each variant went; from the GitHub release of the tag it
reads the assets and `release-manifest.json` (the sha256 of every file as it was built,
published by `release publish`); from each simple index it reads the files of the version.
Where a release has no manifest, GitHub's digests stand in for what was built. The result
is the same `Published` a publish record gives, checked by release.verify.checks the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.errors import ConfigError, VerifyError
from release.matrix import GithubDestination, Matrix, PypiDestination
from release.provenance.attestation import PROVENANCE_SUFFIX
from release.records.manifest import sdist_filename
from release.records.published import (
    SDIST_PURPOSE,
    Published,
    PublishedCompanion,
    PublishedFile,
)
from release.records.release_manifest import (
    RELEASE_MANIFEST,
    ReleaseWheel,
    parse_release_manifest,
)
from release.remote.github import GithubClient
from release.remote.github_model import AssetInfo
from release.remote.httpclient import Client, fetch
from release.remote.retry import RetryPolicy
from release.remote.simple_index import ACCEPT, ListedFile, parse_project_page, project_page_url
from release.wheelfile import NotAWheel, WheelName


def version_of_tag(template: str, tag: str) -> Version:
    """The version a tag names under a template such as `v{version}`."""
    before, _, after = template.partition("{version}")
    match = re.fullmatch(re.escape(before) + r"(.+)" + re.escape(after), tag)
    try:
        if match is None:
            raise InvalidVersion(tag)
        return Version(match.group(1))
    except InvalidVersion:
        raise ConfigError(
            [f"--tag {tag}: not a tag of the form {template!r} with a version in it"],
            hint="give a release tag, e.g. v0.1.0",
        ) from None


def _arch(filename: str) -> str:
    return "aarch64" if filename.endswith("aarch64.whl") else "x86_64"


def published_from_tag(
    matrix: Matrix,
    tag: str,
    *,
    github: Mapping[str, GithubClient],
    http: Client,
    index_base: str | None = None,
) -> Published:
    """What the release of `tag` published, read back from its destinations. `github`
    holds a client per API URL; `index_base` replaces the matrix's index URL."""
    project = matrix.project
    destinations = list(matrix.destinations.values())
    gh = [d for d in destinations if isinstance(d, GithubDestination)]
    pypi = [d for d in destinations if isinstance(d, PypiDestination)]
    if not gh:
        raise ConfigError(
            ["the matrix has no github destination to read a release from"],
            hint="verify with --dist DIR (the publish record) instead",
        )
    version = version_of_tag(gh[0].tag_template, tag)
    files: list[PublishedFile] = []
    companions: list[PublishedCompanion] = []
    built: dict[str, ReleaseWheel] = {}
    for destination in gh:
        client = github[destination.api_url]
        with client.session(f"{destination.repository}@{tag}"):
            release = client.find_release(destination.repository, tag)
            if release is None or release.draft:
                state = "is a draft" if release is not None else "does not exist"
                raise VerifyError(
                    f"the release {destination.repository}@{tag} {state}",
                    hint="publish it first, or check the tag",
                )
            assets = {a.name: a for a in client.list_assets(destination.repository, release)}
            manifest = assets.get(RELEASE_MANIFEST)
            if manifest is not None:
                where = f"{RELEASE_MANIFEST} of {destination.repository}@{tag}"
                for wheel in _release_manifest(client.download_asset(manifest), where):
                    built[wheel.filename] = wheel
            base = index_base or destination.index_url
            for name, asset in sorted(assets.items()):
                found = _wheel_asset(
                    name, asset, destination, project=project.name, built=built, index_base=base
                )
                if found is not None:
                    files.append(found)
                elif asset.state == "uploaded" and asset.sha256:
                    of = _described_wheel(name) or "release"
                    companions.append(
                        PublishedCompanion(
                            filename=name,
                            sha256=asset.sha256,
                            size=asset.size,
                            url=asset.browser_download_url,
                            of=of,
                            purpose="published beside the wheels",
                        )
                    )
    for index in pypi:
        listed = _pypi_listing(index, project.name, http)
        files += _pypi_files(index, listed, version, built)
        companions += _pypi_sdist(listed, project.name, version)
    return Published(
        project=project.name,
        version=str(version.public),
        files=tuple(files),
        companions=tuple(companions),
    )


def _release_manifest(data: bytes, where: str) -> list[ReleaseWheel]:
    try:
        return parse_release_manifest(data)
    except (ValueError, KeyError, TypeError) as error:
        raise VerifyError(
            f"{where} is unreadable ({error})",
            hint="verify with --dist DIR (the publish record) instead",
        ) from None


def _described_wheel(name: str) -> str | None:
    """The wheel a `<wheel>.metadata` or `<wheel>.provenance` describes."""
    for suffix in (".metadata", PROVENANCE_SUFFIX):
        if name.endswith(".whl" + suffix):
            return name.removesuffix(suffix)
    return None


def _wheel_asset(
    name: str,
    asset: AssetInfo,
    destination: GithubDestination,
    *,
    project: str,
    built: Mapping[str, ReleaseWheel],
    index_base: str | None,
) -> PublishedFile | None:
    try:
        wheel = WheelName.parse(name)
    except NotAWheel:
        return None
    version = wheel.version
    if wheel.project != canonicalize_name(project):
        return None
    recorded = built.get(name)
    sha256 = recorded.sha256 if recorded else asset.sha256
    if sha256 is None:
        return None
    label = version.local
    base = index_base.rstrip("/") + "/" if index_base else None
    return PublishedFile(
        filename=name,
        sha256=sha256,
        size=recorded.size if recorded else asset.size,
        url=asset.browser_download_url,
        destination=destination.name,
        kind="github",
        index_url=f"{base}{label}/" if base and label else None,
        arch=_arch(name),
        local_label=label,
        attested=recorded.attested if recorded else False,
    )


def _pypi_sdist(
    listed: Mapping[str, ListedFile], project: str, version: Version
) -> list[PublishedCompanion]:
    """The release's sdist as PyPI lists it: release-manifest.json does not record it, so
    what PyPI lists stands in for what was built (its URL must serve those bytes)."""
    name = sdist_filename(project, str(version.public))
    item = listed.get(name)
    if item is None or item.sha256 is None:
        return []
    return [
        PublishedCompanion(
            filename=name, sha256=item.sha256, size=item.size if item.size is not None else -1,
            url=item.url, of="release", purpose=SDIST_PURPOSE,
        )
    ]  # fmt: skip


def _pypi_listing(
    destination: PypiDestination, project: str, http: Client
) -> dict[str, ListedFile]:
    page = project_page_url(destination.index_url, project)
    got = fetch(http, page, keep=True, accept=ACCEPT, policy=RetryPolicy(attempts=3, total=120.0))
    if not got.ok or got.body is None:
        raise VerifyError(
            f"cannot read {page}: {got.error or f'HTTP {got.status}'}",
            hint="check the index URL in matrix.yaml",
        )
    try:
        return parse_project_page(got.body, got.content_type, page)
    except ValueError as error:
        raise VerifyError(
            f"{page}: unreadable index page: {error}", hint="check the index URL in matrix.yaml"
        ) from None


def _pypi_files(
    destination: PypiDestination,
    listed: Mapping[str, ListedFile],
    version: Version,
    built: Mapping[str, ReleaseWheel],
) -> list[PublishedFile]:
    out = []
    for name, item in sorted(listed.items()):
        try:
            file_version = WheelName.parse(name).version
        except NotAWheel:
            continue
        if file_version != version:
            continue
        recorded = built.get(name)
        sha256 = recorded.sha256 if recorded else item.sha256
        if sha256 is None:
            continue
        out.append(
            PublishedFile(
                filename=name,
                sha256=sha256,
                size=recorded.size if recorded else (item.size if item.size is not None else -1),
                url=item.url,
                destination=destination.name,
                kind="pypi",
                index_url=destination.index_url,
                arch=_arch(name),
                local_label=None,
                attested=recorded.attested if recorded else False,
            )
        )
    return out


def latest_tags(client: GithubClient, repository: str, count: int) -> list[str]:
    """The tags of the newest `count` published releases (GitHub lists newest first)."""
    with client.session(f"{repository} (releases)"):
        releases = [r for r in client.list_releases(repository) if not r.draft]
    return [r.tag for r in releases[:count]]
