"""The PyPI kind (PyPI, TestPyPI, any simple index that takes twine uploads): the default
variant's wheels and the release's sdist, listed by the index itself.

What the stages ask of it, answered here: its publisher (release.destinations.
pypi_publisher), the sdist beside the wheels, its own index as where pip finds them, the
index credentials reading its listing takes, PEP 740 provenance from its integrity API, a
release re-derived from its project page, and its final releases from that page.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from packaging.version import Version

from release.destinations.base import (
    KindBase,
    ProvenanceRoute,
    Publisher,
    Rederived,
    Rederiving,
    Uploaded,
    arch_of,
)
from release.destinations.decide import Companion
from release.destinations.pypi_publisher import PypiPublisher, sdist_companions
from release.destinations.reach import IndexLogin, Reach
from release.errors import PublishError, VerifyError
from release.matrix import Destination, PypiDestination
from release.records.manifest import DestinationRef, Manifest, WheelEntry, sdist_filename
from release.records.published import SDIST_PURPOSE, PublishedCompanion, PublishedFile
from release.records.release_manifest import ReleaseWheel
from release.remote import httpclient
from release.remote.httpclient import Client, OriginAuth
from release.remote.retry import RetryPolicy
from release.remote.simple_index import (
    ACCEPT,
    ListedFile,
    parse_project_page,
    project_page_url,
    versions_listed,
)
from release.wheelfile import NotAWheel, WheelName


class PypiKind(KindBase):
    name = "pypi"
    can_replace = False  # PyPI never takes other bytes under a filename it had
    index_check = "listing"  # its project page is the destination's own listing
    attestations: ProvenanceRoute | None = ProvenanceRoute.PYPI

    def publisher(
        self, destination: DestinationRef, reach: Reach, on_upload: Uploaded | None = None
    ) -> Publisher:
        return PypiPublisher(destination, reach=reach, on_upload=on_upload)

    def companions(
        self,
        manifest: Manifest,
        destination: str,
        entries: Sequence[WheelEntry],
        dist: Path,
        release: Sequence[Companion] = (),
    ) -> list[Companion]:
        """The release's sdist, where the manifest sends it here."""
        return sdist_companions(manifest, destination, dist)

    def index_url(self, entry: WheelEntry, publisher: Publisher, reach: Reach) -> str | None:
        return publisher.index_url

    def file_auth(self, files: Sequence[PublishedFile], reach: Reach) -> OriginAuth:
        """The index credentials for the origins of its files and its index, sent only when
        they ask (a private index)."""
        indexes = [(f.index_url or f.url, [f.url, f.index_url]) for f in files]
        return reach.origin_auth(indexes=indexes)

    def index_login(self, destination: Destination, reach: Reach) -> IndexLogin | None:
        if not isinstance(destination, PypiDestination):
            return None
        return reach.upload_url(destination.repository_url), [destination.index_url]

    def rederive(self, destination: Destination, release: Rederiving) -> Rederived:
        """The files its project page lists of the version: the wheels (with what the
        release manifests say was built, else the page's digests) and the sdist."""
        if not isinstance(destination, PypiDestination):
            return Rederived()
        listed = _listing(destination, release.project, release.http)
        return Rederived(
            files=tuple(_files(destination, listed, release.version, release.built)),
            companions=tuple(_sdist(listed, release.project, release.version)),
        )

    def released_versions(
        self,
        destination: Destination,
        project: str,
        reach: Reach,
        http: Client,
        policy: RetryPolicy | None = None,
    ) -> Collection[Version]:
        """The versions its project page lists (none where there is no page yet)."""
        if not isinstance(destination, PypiDestination):
            return ()
        page = project_page_url(destination.index_url, project)
        got = httpclient.fetch(
            http, page, keep=True, accept=ACCEPT, policy=policy, secrets=reach.secrets
        )
        if got.status == 404:
            return ()  # no release of the project yet
        if not got.ok or got.body is None:
            raise PublishError(f"{page}: {got.error or f'HTTP {got.status}'}")
        try:
            listed = parse_project_page(got.body, got.content_type, page)
        except ValueError as error:
            raise PublishError(f"{page}: unreadable project page ({error})") from None
        return versions_listed(listed)


PYPI = PypiKind()


def _listing(destination: PypiDestination, project: str, http: Client) -> dict[str, ListedFile]:
    page = project_page_url(destination.index_url, project)
    got = httpclient.fetch(
        http, page, keep=True, accept=ACCEPT, policy=RetryPolicy(attempts=3, total=120.0)
    )
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


def _files(
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
                kind=PYPI.name,
                index_url=destination.index_url,
                arch=arch_of(name),
                local_label=None,
                attested=recorded.attested if recorded else False,
            )
        )
    return out


def _sdist(
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
