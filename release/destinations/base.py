"""What a destination is to the stages: the `DestinationKind` protocol, which one module per
kind implements (release.destinations.registry names them), and the `Publisher` a kind makes
for one destination of a manifest.

Everything `release plan`, `release publish`, `release verify` and the nightly channel ask
of a destination goes through its kind: its publisher (plan, stage, commit), the files
published beside its wheels, the index pip finds them in, the previous release (growth),
what verify checks there and with which credentials, a release re-derived from it alone,
and the final releases the nightly channel must sort above. `KindBase` answers "nothing
here" for each, so that a kind says only what it does. Its size limits and what the matrix
rules ask of it are its value type's (release.matrix.destination).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from packaging.version import Version

from release.destinations.decide import Companion, FileDecision, PublishPlan, RemoteFile
from release.destinations.index import IndexFile
from release.destinations.reach import IndexLogin, Reach
from release.errors import PublishError
from release.matrix import KINDS, Destination
from release.records.manifest import DestinationRef, IndexRef, Manifest, WheelEntry
from release.records.published import PublishedCompanion, PublishedFile
from release.records.release_manifest import PreviousRelease, ReleaseWheel
from release.remote.github import GithubClient
from release.remote.httpclient import Client, OriginAuth
from release.remote.retry import RetryPolicy

Uploaded = Callable[[str, int], None]  # after each file sent: its name and size


def arch_of(filename: str) -> str:
    """The CPU arch of a published wheel, by its name."""
    return "aarch64" if filename.endswith("aarch64.whl") else "x86_64"


class Publisher(Protocol):
    """One destination. Implementations: PyPI (twine) and GitHub Releases (githubkit)."""

    name: str
    stages: bool  # whether `stage` can hold files without making them public

    @property
    def frozen(self) -> str | None:
        """Why the destination takes no new or other bytes at all, as `existing` found it
        (a published immutable GitHub release); None where it takes them."""
        ...

    @property
    def taken(self) -> str | None:
        """Why the place this release goes is another project's, as `existing` found it
        (a GitHub release at the tag that holds another project's wheels); None where it
        is free or this project's."""
        ...

    @property
    def index_url(self) -> str | None:
        """The simple index that lists what this destination published, if one does."""
        ...

    def existing(self, files: Mapping[str, int], *, rehash: bool) -> Mapping[str, RemoteFile]:
        """What the destination already has under these filenames (name -> built size;
        read-only requests); with `rehash`, sha256 from the bytes, whatever the
        destination reports."""
        ...

    def held_files(self) -> Collection[str]:
        """The name of every file the destination holds whole (a failed upload's leftover
        not), however spelled, as the last `existing` read them (no further request): what
        a rebuild's build tag must sort above."""
        ...

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        """Why the destination would reject this file, checked before any upload."""
        ...

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        """What the destination holds of the project besides the files named, as the last
        `existing` read it (no further request); None when that cannot be learnt cheaply."""
        ...

    def final_url(self, name: str) -> str:
        """Where a file will be downloadable once published."""
        ...

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        """Make every file of the plan present, publicly nothing new; what was done."""
        ...

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        """Make the plan public; the decisions with the final URLs the destination gives."""
        ...


class ProvenanceRoute(enum.Enum):
    """Where the attestations of a destination's files are read."""

    GITHUB = "GitHub's attestations API of the destination's repository"
    PYPI = "PyPI's integrity API (PEP 740), else GitHub's of the same sha256"


@dataclass(kw_only=True)
class Rederiving:
    """One release being re-derived from its destinations (`release verify --tag`): its
    tag and version, how to ask, and what the release manifests read so far say was built
    (the kinds that read one first fill it in)."""

    project: str
    tag: str
    version: Version
    reach: Reach
    http: Client
    built: dict[str, ReleaseWheel] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class IndexWritten:
    """Where a kind that lists other destinations' wheels wrote their index pages."""

    where: str  # for the user: the remote, branch and directory
    commit: str | None = None  # the commit the pages are in, where it keeps them in git
    changed: bool = True  # False: it held these pages already


@dataclass(frozen=True, kw_only=True)
class Rederived:
    files: tuple[PublishedFile, ...] = ()
    companions: tuple[PublishedCompanion, ...] = ()


class DestinationKind(Protocol):
    """One kind of destination (`kind:` in matrix.yaml): everything the stages ask of it."""

    name: str  # the kind's name: matrix.yaml's `kind:`, the manifest's and the records'

    # -- publish: plan, stage, commit ---------------------------------------------------

    can_replace: bool  # whether --replace may overwrite a file it holds (PyPI: never)

    def publisher(
        self, destination: DestinationRef, reach: Reach, on_upload: Uploaded | None = None
    ) -> Publisher:
        """Its publisher of the manifest's `destination` (PublishError: not reachable)."""
        ...

    def companions(
        self,
        manifest: Manifest,
        destination: str,
        entries: Sequence[WheelEntry],
        dist: Path,
        release: Sequence[Companion] = (),
    ) -> list[Companion]:
        """The files it publishes beside `entries` (the wheels going to `destination`),
        given the release's own (`release`: its NCCL files and release-manifest.json)."""
        ...

    def index_url(self, entry: WheelEntry, publisher: Publisher, reach: Reach) -> str | None:
        """The index pip finds a published wheel in (the publish record's `index_url`)."""
        ...

    def index_source(self, destination: DestinationRef, reach: Reach) -> str | None:
        """What the pip index of the variants lists of it, as a key (one per repository and
        API), or None where the index lists nothing of it."""
        ...

    def index_files(
        self, destination: DestinationRef, reach: Reach, project: str
    ) -> tuple[list[IndexFile], list[str]]:
        """The files that index lists of it (everything it ever published of `project`),
        and the ones left out, said why."""
        ...

    def index_base(self, destination: DestinationRef, reach: Reach) -> str | None:
        """Where that index is served (`--index-base-url`, else its `index-url`)."""
        ...

    def check_index(
        self, index: IndexRef, labels: Collection[str], reach: Reach, *, project: str
    ) -> None:
        """A kind that lists other destinations' wheels, before anything of the release is
        published: PublishError where `push_index` of `project`'s pages of `labels` would
        fail for a reason known now (its remote, its token, an entry in the way)."""
        ...

    def push_index(
        self,
        index: IndexRef,
        tree: Mapping[str, bytes],
        reach: Reach,
        *,
        project: str,
        version: str,
    ) -> IndexWritten:
        """A kind that lists other destinations' wheels (a github destination's `index`):
        write `tree`, `project`'s pages of the variants' index (`<label>/<project>/...`),
        for its release `version` (PublishError: it cannot; nothing half-written)."""
        ...

    # -- plan: growth ---------------------------------------------------------------------

    def keeps_releases(self, destination: Destination) -> str | None:
        """Where it keeps each release's release-manifest.json (its repository), or None."""
        ...

    def previous_release(
        self, destination: Destination, version: Version, reach: Reach
    ) -> PreviousRelease | None:
        """The highest release below `version` it keeps, with what was built (None: none)."""
        ...

    # -- verify ---------------------------------------------------------------------------

    index_check: str  # "listing": its index page is its own listing; "index": one of links
    attestations: ProvenanceRoute | None  # where its files' attestations are read

    @property
    def takes_sdist(self) -> bool:
        """Whether the release's sdist goes here with the default variant's wheels."""
        ...

    def file_auth(self, files: Sequence[PublishedFile], reach: Reach) -> OriginAuth:
        """The credentials downloading its published `files` takes, by origin."""
        ...

    def index_login(self, destination: Destination, reach: Reach) -> IndexLogin | None:
        """The index whose credentials reading its listing takes, where it has one."""
        ...

    def signer(self, destination: Destination, version: str) -> tuple[str, str | None] | None:
        """(repository, ref) whose workflow signs the release's attestations: a repository
        it lives in, at the release's tag (ref None: any); None where it names none."""
        ...

    def attestation_source(
        self, destination: Destination, reach: Reach
    ) -> tuple[GithubClient, str] | None:
        """The GitHub client and repository its files' attestations are read from."""
        ...

    def release_version(self, destination: Destination, tag: str) -> Version | None:
        """The version `tag` names there (ConfigError where it names none); None where it
        does not tag releases."""
        ...

    def latest_tags(self, destination: Destination, reach: Reach, count: int) -> list[str] | None:
        """The tags of its newest `count` releases; None where it does not tag releases."""
        ...

    reads_first: bool  # its `rederive` reads what was built, for the kinds read after it

    def rederive(self, destination: Destination, release: Rederiving) -> Rederived:
        """What it holds of `release`, read from it alone."""
        ...

    # -- the nightly channel --------------------------------------------------------------

    def released_versions(
        self,
        destination: Destination,
        project: str,
        reach: Reach,
        http: Client,
        policy: RetryPolicy | None = None,
    ) -> Collection[Version]:
        """The versions of `project` it has released, asked under `policy` (PublishError:
        it cannot be asked)."""
        ...


class KindBase:
    """What a kind without the capability answers: nothing here. A kind subclasses it and
    overrides what it does."""

    name = ""
    can_replace = True
    index_check = "index"
    attestations: ProvenanceRoute | None = None
    reads_first = False

    def publisher(
        self, destination: DestinationRef, reach: Reach, on_upload: Uploaded | None = None
    ) -> Publisher:
        raise PublishError(f"{destination.name}: {self.name} destinations take no release")

    def companions(
        self,
        manifest: Manifest,
        destination: str,
        entries: Sequence[WheelEntry],
        dist: Path,
        release: Sequence[Companion] = (),
    ) -> list[Companion]:
        return []

    def index_url(self, entry: WheelEntry, publisher: Publisher, reach: Reach) -> str | None:
        return None

    def index_source(self, destination: DestinationRef, reach: Reach) -> str | None:
        return None

    def index_files(
        self, destination: DestinationRef, reach: Reach, project: str
    ) -> tuple[list[IndexFile], list[str]]:
        return [], []

    def index_base(self, destination: DestinationRef, reach: Reach) -> str | None:
        base = reach.index_base_url or destination.index_url
        return None if base is None else base.rstrip("/") + "/"

    def check_index(
        self, index: IndexRef, labels: Collection[str], reach: Reach, *, project: str
    ) -> None:
        raise PublishError(f"{index.name}: {self.name} destinations list no other's wheels")

    def push_index(
        self,
        index: IndexRef,
        tree: Mapping[str, bytes],
        reach: Reach,
        *,
        project: str,
        version: str,
    ) -> IndexWritten:
        raise PublishError(f"{index.name}: {self.name} destinations list no other's wheels")

    def keeps_releases(self, destination: Destination) -> str | None:
        return None

    def previous_release(
        self, destination: Destination, version: Version, reach: Reach
    ) -> PreviousRelease | None:
        return None

    @property
    def takes_sdist(self) -> bool:
        value_type = KINDS.get(self.name)
        return value_type is not None and value_type.TAKES_SDIST

    def file_auth(self, files: Sequence[PublishedFile], reach: Reach) -> OriginAuth:
        return OriginAuth()

    def index_login(self, destination: Destination, reach: Reach) -> IndexLogin | None:
        return None

    def signer(self, destination: Destination, version: str) -> tuple[str, str | None] | None:
        return None

    def attestation_source(
        self, destination: Destination, reach: Reach
    ) -> tuple[GithubClient, str] | None:
        return None

    def release_version(self, destination: Destination, tag: str) -> Version | None:
        return None

    def latest_tags(self, destination: Destination, reach: Reach, count: int) -> list[str] | None:
        return None

    def rederive(self, destination: Destination, release: Rederiving) -> Rederived:
        return Rederived()

    def released_versions(
        self,
        destination: Destination,
        project: str,
        reach: Reach,
        http: Client,
        policy: RetryPolicy | None = None,
    ) -> Collection[Version]:
        return ()
