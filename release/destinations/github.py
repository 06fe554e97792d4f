"""The GitHub Releases kind: one release per tag of a repository, its assets the wheels of
the variants it takes, a pip index of them (release.destinations.index) served elsewhere.

What the stages ask of it, answered here: its publisher (release.destinations.
github_publisher), the files beside each wheel and the release (`.metadata`, `.provenance`,
NCCL files, release-manifest.json), every published wheel the index lists (`collect`), the
previous release with its release-manifest.json (growth), the token for its downloads, the
signer of its attestations, a release re-derived from the tag's assets and its
release-manifest.json, and its final releases by their tags. Every request goes through the
command's client of its API (release.destinations.reach).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name
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
from release.destinations.companions import wheel_companions
from release.destinations.decide import Companion
from release.destinations.github_publisher import GithubPublisher
from release.destinations.index import METADATA_SUFFIX, IndexFile, requires_python_of
from release.destinations.reach import Reach
from release.errors import ConfigError, PublishError, VerifyError, one_line
from release.fsutil import MAX_DOCUMENT_BYTES
from release.matrix import Destination, GithubDestination
from release.provenance.attestation import PROVENANCE_SUFFIX, provenance_problem
from release.records.manifest import DestinationRef, Manifest, WheelEntry
from release.records.published import PublishedCompanion, PublishedFile
from release.records.release_manifest import (
    RELEASE_MANIFEST,
    PreviousRelease,
    ReleaseWheel,
    parse_release_manifest,
    previous_release,
)
from release.remote.github import GithubClient
from release.remote.github_model import GITHUB_API, AssetInfo, parse_asset, parse_release
from release.remote.httpclient import Client, Download, OriginAuth, fetch, origin_of
from release.remote.lazywheel import LazyWheelError, remote_wheel_metadata
from release.remote.retry import RetryPolicy
from release.wheelfile import WHEEL_SUFFIX, NotAWheel, WheelName, wheel_facts


class GithubKind(KindBase):
    name = "github"
    attestations: ProvenanceRoute | None = ProvenanceRoute.GITHUB
    reads_first = True  # its release-manifest.json says what was built

    # -- publish ----------------------------------------------------------------------------

    def publisher(
        self, destination: DestinationRef, reach: Reach, on_upload: Uploaded | None = None
    ) -> Publisher:
        # a dry run reads public releases
        reach.require_github_token(destination.name, destination.token_secret)
        return GithubPublisher(
            repository=destination.repository or "",
            tag=destination.tag or "",
            client=reach.github(destination.api_url, token_secret=destination.token_secret),
            name=destination.name,
            on_upload=on_upload,
        )

    def companions(
        self,
        manifest: Manifest,
        destination: str,
        entries: Sequence[WheelEntry],
        dist: Path,
        release: Sequence[Companion] = (),
    ) -> list[Companion]:
        """Each wheel's `.metadata` and `.provenance`, then the release's files."""
        return [c for e in entries for c in wheel_companions(e, dist)] + list(release)

    def index_url(self, entry: WheelEntry, publisher: Publisher, reach: Reach) -> str | None:
        base = self.index_base(entry.destination, reach)
        if base is None or entry.local_label is None:
            return None
        return f"{base}{entry.local_label}/"

    def index_source(self, destination: DestinationRef, reach: Reach) -> str | None:
        api_url = reach.github_api_url or destination.api_url or GITHUB_API
        return f"{api_url} {destination.repository or ''}"

    def index_files(
        self, destination: DestinationRef, reach: Reach, project: str
    ) -> tuple[list[IndexFile], list[str]]:
        repository = destination.repository or ""
        client = reach.github(destination.api_url, token_secret=destination.token_secret)
        with reach.http() as downloads, client.session(f"{repository} (index)"):
            return collect(client, repository, project, downloads, secrets=reach.secrets)

    # -- plan: growth ---------------------------------------------------------------------

    def keeps_releases(self, destination: Destination) -> str | None:
        return destination.repository if isinstance(destination, GithubDestination) else None

    def previous_release(
        self, destination: Destination, version: Version, reach: Reach
    ) -> PreviousRelease | None:
        if not isinstance(destination, GithubDestination):
            return None
        return previous_on_github(_client(destination, reach), destination, version)

    # -- verify ---------------------------------------------------------------------------

    def file_auth(self, files: Sequence[PublishedFile], reach: Reach) -> OriginAuth:
        """The GitHub token for the origin of its files (a private repository's assets)."""
        return reach.origin_auth(bearer=[origin_of(file.url) for file in files])

    def signer(self, destination: Destination, version: str) -> tuple[str, str | None] | None:
        if not isinstance(destination, GithubDestination):
            return None
        try:
            return destination.repository, f"refs/tags/{destination.tag(Version(version))}"
        except ValueError:  # InvalidVersion, or a number of more digits than int() reads
            return destination.repository, None  # then any tag

    def attestation_source(
        self, destination: Destination, reach: Reach
    ) -> tuple[GithubClient, str] | None:
        if not isinstance(destination, GithubDestination):
            return None
        return _client(destination, reach), destination.repository

    def release_version(self, destination: Destination, tag: str) -> Version | None:
        if not isinstance(destination, GithubDestination):
            return None
        version = destination.version_of_tag(tag)
        if version is None:
            raise ConfigError(
                [f"--tag {tag}: not a tag of the form {destination.tag_template!r} with a "
                 "version in it"],
                hint="give a release tag, e.g. v0.1.0",
            )  # fmt: skip
        return version

    def latest_tags(self, destination: Destination, reach: Reach, count: int) -> list[str] | None:
        if not isinstance(destination, GithubDestination):
            return None
        return latest_tags(_client(destination, reach), destination.repository, count)

    def rederive(self, destination: Destination, release: Rederiving) -> Rederived:
        """The assets of the tag's release: its wheels (with what its release-manifest.json
        says was built, else GitHub's digests) and the files beside them."""
        if not isinstance(destination, GithubDestination):
            return Rederived()
        client = _client(destination, release.reach)
        repository, tag = destination.repository, release.tag
        files: list[PublishedFile] = []
        companions: list[PublishedCompanion] = []
        with client.session(f"{repository}@{tag}"):
            found = client.find_release(repository, tag)
            if found is None or found.draft:
                state = "is a draft" if found is not None else "does not exist"
                raise VerifyError(
                    f"the release {repository}@{tag} {state}",
                    hint="publish it first, or check the tag",
                )
            assets = {a.name: a for a in client.list_assets(repository, found)}
            manifest = assets.get(RELEASE_MANIFEST)
            if manifest is not None:
                where = f"{RELEASE_MANIFEST} of {repository}@{tag}"
                for wheel in release_manifest(_manifest_bytes(client, manifest, where), where):
                    release.built[wheel.filename] = wheel
            base = release.reach.index_base_url or destination.index_url
            for name, asset in sorted(assets.items()):
                wheel_file = _wheel_asset(
                    name, asset, destination, project=release.project, built=release.built,
                    index_base=base,
                )  # fmt: skip
                if wheel_file is not None:
                    files.append(wheel_file)
                elif asset.state == "uploaded" and asset.sha256:
                    companions.append(_companion_asset(name, asset))
        return Rederived(files=tuple(files), companions=tuple(companions))

    # -- the nightly channel --------------------------------------------------------------

    def released_versions(
        self,
        destination: Destination,
        project: str,
        reach: Reach,
        http: Client,
        policy: RetryPolicy | None = None,
    ) -> Collection[Version]:
        """The versions its published releases' tags name."""
        if not isinstance(destination, GithubDestination):
            return ()
        client = _client(destination, reach, policy)
        with client.session(f"{destination.repository} (its latest release)"):
            releases = client.published_releases(destination.repository)
        versions = [destination.version_of_tag(r.tag) for r, _ in releases]
        return [v for v in versions if v is not None]


GITHUB = GithubKind()


def _client(
    destination: GithubDestination, reach: Reach, policy: RetryPolicy | None = None
) -> GithubClient:
    """The command's client of the destination's API, with its token-secret's token."""
    return reach.github(destination.api_url, policy=policy, token_secret=destination.token_secret)


# --- What the index lists: every published wheel of the repository. ---


def collect(
    client: GithubClient,
    repository: str,
    project: str,
    downloads: Client,
    *,
    secrets: Sequence[str] = (),
) -> tuple[list[IndexFile], list[str]]:
    """Every wheel with a local label on every published release of `repository` (inside
    one client session): the full set the index is regenerated from. Each file's
    attributes come from what is published: the digest (or the download) for sha256, the
    `.metadata` sidecar (or the wheel itself) for Requires-Python. Other assets (sidecars,
    NCCL files, the release manifest) are not the index's; an asset named like a wheel
    whose name is not a valid wheel filename is left out too, and said in the second list
    (pip could not install it). A `.metadata` sidecar is vouched for (PEP 658) only where
    it is the wheel's own METADATA, read from the wheel served at its download URL by
    range requests through `downloads` (release.remote.lazywheel); one that is not, or whose
    wheel cannot be read so, is left out with a line of the second list, and pip reads the
    wheel's METADATA from the wheel. A name two releases hold is listed as often as it is
    held: the index (release.destinations.index.one_per_name) says whether the bytes differ."""

    def get(url: str, *, keep: bool, byte_range: tuple[int, int]) -> Download:
        return fetch(downloads, url, keep=keep, byte_range=byte_range, policy=client.policy,
                     secrets=secrets)  # fmt: skip

    def wheel_metadata(url: str) -> bytes:
        return remote_wheel_metadata(get, url)

    files: list[IndexFile] = []
    skipped: list[str] = []
    for data in client.list_releases_json(repository):
        release = parse_release(data)
        if release.draft:
            continue
        raw_assets = data.get("assets")
        listed = (
            [parse_asset(a) for a in raw_assets]
            if isinstance(raw_assets, list)
            else client.list_assets(repository, release)
        )
        assets = {a.name: a for a in listed if a.state == "uploaded"}
        for name, asset in sorted(assets.items()):
            if not name.endswith(WHEEL_SUFFIX):
                continue
            try:
                wheel = WheelName.parse(name)
            except NotAWheel as why:
                skipped.append(one_line(f"left out {repository}@{release.tag} asset {name}: {why}"))
                continue
            if wheel.project != canonicalize_name(project) or not wheel.version.local:
                continue
            file, unvouched = _index_file(
                client,
                asset,
                assets.get(name + METADATA_SUFFIX),
                assets.get(name + PROVENANCE_SUFFIX),
                wheel_metadata,
            )
            files.append(file)
            if unvouched is not None:
                skipped.append(
                    one_line(
                        f"left out the PEP 658 metadata of {repository}@{release.tag} asset "
                        f"{name}: {unvouched}"
                    )
                )
    return files, skipped


def _index_file(
    client: GithubClient,
    wheel: AssetInfo,
    sidecar: AssetInfo | None,
    provenance: AssetInfo | None,
    wheel_metadata: Callable[[str], bytes],
) -> tuple[IndexFile, str | None]:
    """The wheel as the index lists it, and why its sidecar is left out (None: it is not,
    or there is none)."""
    why: str | None = None
    if sidecar is not None:
        metadata = client.download_asset(sidecar)
        metadata_sha256: str | None = hashlib.sha256(metadata).hexdigest()
        if sidecar.sha256 is not None and sidecar.sha256 != metadata_sha256:
            metadata_sha256 = None  # bytes that do not match their digest: do not point at them
        sha256 = client.asset_sha256(wheel)
        own, why = _own_metadata(client, wheel, wheel_metadata)
        if why is None and own != metadata:
            why = "it is not the wheel's own METADATA (pip would resolve from it)"
        if why is not None:
            metadata, metadata_sha256 = own, None
    else:
        data = client.download_asset(wheel)
        sha256 = hashlib.sha256(data).hexdigest()
        metadata = wheel_facts(data).metadata or b""
        metadata_sha256 = None
    return IndexFile(
        filename=wheel.name,
        url=wheel.browser_download_url,
        sha256=sha256,
        size=wheel.size,
        requires_python=requires_python_of(metadata) if metadata else None,
        metadata_sha256=metadata_sha256,
        provenance_url=_provenance_url(client, provenance, sha256),
    ), why


def _own_metadata(
    client: GithubClient, wheel: AssetInfo, wheel_metadata: Callable[[str], bytes]
) -> tuple[bytes, str | None]:
    """The wheel's METADATA as served (read with range requests; where the storage takes
    none, or the repository is private, from the whole wheel as the API downloads it), or
    why it cannot be read."""
    try:
        return wheel_metadata(wheel.browser_download_url), None
    except LazyWheelError:
        pass
    try:
        found = wheel_facts(client.download_asset(wheel)).metadata
    except PublishError as error:
        return b"", f"its wheel's METADATA cannot be read to compare ({error.message})"
    if found is None:
        return b"", "its wheel holds no METADATA to compare"
    return found, None


def _provenance_url(client: GithubClient, asset: AssetInfo | None, sha256: str) -> str | None:
    """Where the wheel's provenance object is hosted, when it is one that attests the wheel's
    bytes (a link to anything else would be a false promise)."""
    if asset is None:
        return None
    body = client.download_asset(asset)
    if asset.sha256 is not None and asset.sha256 != hashlib.sha256(body).hexdigest():
        return None
    return asset.browser_download_url if provenance_problem(body, sha256) is None else None


# --- A release read back from its assets. ---


def release_manifest(data: bytes, where: str) -> list[ReleaseWheel]:
    try:
        return parse_release_manifest(data)
    except (ValueError, KeyError, TypeError) as error:
        raise VerifyError(
            f"{where} is unreadable ({error})",
            hint="verify with --dist DIR (the publish record) instead",
        ) from None


def described_wheel(name: str) -> str | None:
    """The wheel a `<wheel>.metadata` or `<wheel>.provenance` describes."""
    for suffix in (METADATA_SUFFIX, PROVENANCE_SUFFIX):
        if name.endswith(WHEEL_SUFFIX + suffix):
            return name.removesuffix(suffix)
    return None


def _companion_asset(name: str, asset: AssetInfo) -> PublishedCompanion:
    return PublishedCompanion(
        filename=name,
        sha256=asset.sha256 or "",
        size=asset.size,
        url=asset.browser_download_url,
        of=described_wheel(name) or "release",
        purpose="published beside the wheels",
    )


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
    if wheel.project != canonicalize_name(project):
        return None
    recorded = built.get(name)
    sha256 = recorded.sha256 if recorded else asset.sha256
    if sha256 is None:
        return None
    label = wheel.local_label
    base = index_base.rstrip("/") + "/" if index_base else None
    return PublishedFile(
        filename=name,
        sha256=sha256,
        size=recorded.size if recorded else asset.size,
        url=asset.browser_download_url,
        destination=destination.name,
        kind=GITHUB.name,
        index_url=f"{base}{label}/" if base and label else None,
        arch=arch_of(name),
        local_label=label,
        attested=recorded.attested if recorded else False,
    )


def latest_tags(client: GithubClient, repository: str, count: int) -> list[str]:
    """The tags of the newest `count` published releases (GitHub lists newest first)."""
    with client.session(f"{repository} (releases)"):
        releases = [r for r in client.list_releases(repository) if not r.draft]
    return [r.tag for r in releases[:count]]


def _manifest_bytes(client: GithubClient, asset: AssetInfo, named: str) -> bytes:
    """A release's release-manifest.json (the asset `named`); a PublishError, before any
    request, where GitHub lists it larger than a JSON document is read (its listed size
    bounds the download, and the listing is the server's word)."""
    if asset.size > MAX_DOCUMENT_BYTES:
        raise PublishError(
            f"GitHub lists {named} at {asset.size / 2**20:.1f} MiB, more than the "
            f"{MAX_DOCUMENT_BYTES // 2**20} MiB a {RELEASE_MANIFEST} is read to",
            hint="check that asset of the release: the release-manifest.json this tool writes "
            "is far smaller",
        )
    return client.download_asset(asset)


# --- The previous release, for growth. ---


def previous_on_github(
    client: GithubClient, destination: GithubDestination, version: Version
) -> PreviousRelease | None:
    """The highest published version below `version` whose GitHub release holds a
    release-manifest.json (read-only requests); None when there is none."""
    repository = destination.repository
    with client.session(f"{repository} (previous release)"):
        found = []
        for release, assets in client.published_releases(repository):
            released = destination.version_of_tag(release.tag)
            asset = next(
                (a for a in assets if a.name == RELEASE_MANIFEST and a.state == "uploaded"), None
            )
            if released is not None and released < Version(version.public) and asset:
                found.append((released, release.tag, asset))
        if not found:
            return None
        released, tag, asset = max(found, key=lambda item: item[0])
        data = _manifest_bytes(client, asset, f"{RELEASE_MANIFEST} of {repository}@{tag}")
    source = f"{RELEASE_MANIFEST} of the GitHub release {tag} of {repository}"
    try:
        return previous_release(data, source=source)
    except (ValueError, KeyError, TypeError) as error:
        raise PublishError(f"{source} is unreadable ({error})") from None
