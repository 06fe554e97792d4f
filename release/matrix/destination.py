"""The destinations of matrix.yaml: what each kind is (a frozen value, with the facts the
matrix's rules and the manifest ask of it), how its `destinations:` entry loads, and the
table the loader dispatches through (`KINDS`: kind -> its value type).

Nothing here branches on a kind: each value type answers for itself (which local labels it
takes, whether it holds releases or the nightly channel, what the manifest records of it).
What the stages do with a destination (plan, publish, verify, the nightly channel's finals)
is release.destinations', one module per kind beside this one's value type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from packaging.version import Version

from release.errors import shown
from release.github_names import repository_problem
from release.matrix.compilecache import PREFIX, s3_problems, with_slash
from release.matrix.gitindex import check_token_secret, index_place, is_ref_name
from release.matrix.spec import DestinationSpec
from release.yamlspec import DocumentLoader, join_path

PYPI_DEFAULT_MAX_MIB = 100
PYPI_DEFAULT_PROJECT_GIB = 10  # PyPI's project size limit unless it raised the project's
GITHUB_ASSET_MAX_MIB = 2048
S3_OBJECT_MAX_MIB = 5 * 1024  # the most one S3 PutObject takes (AWS, R2 and MinIO alike)

Recorded = Mapping[str, str | None]  # what dist/manifest.json records of a destination
# the keys of the kinds that hold wheels (a git index holds pages)
WHEEL_KEYS = ("max_file_size_mib", "max_project_size_gib", "max_growth_percent")


class BaseDestination:
    """What every kind answers; a kind's value type overrides what differs."""

    name: str
    kind: str
    index_url: str | None
    max_file_size: int
    max_project_size: int | None
    max_growth_percent: int | None

    KEYS: ClassVar[tuple[str, ...]] = ()  # its own keys of DestinationSpec (snake_case)
    RECORD_NEEDS: ClassVar[tuple[str, ...]] = ()  # what a manifest's entry of it must hold
    DEFAULT_PROJECT_SIZE: ClassVar[int | None] = None  # for a manifest that recorded none
    TAKES_SDIST: ClassVar[bool] = False  # the release's sdist goes with the default variant

    def cuda_problem(self, local_label: str | None) -> tuple[str, str] | None:
        """(key, why) where a CUDA version cannot send its wheels here: a `local-label` it
        refuses, or a `destination` that holds no releases."""
        return None

    def twin_problem(self, versions: str, wheel: str) -> str | None:
        """Why two CUDA versions may not send one filename here, beyond a release holding
        one file of a name (None: that general reason says it)."""
        return None

    def torch_problem(self, count: int, cuda: str) -> str | None:
        """Why a CUDA version may not send `count` torch versions here, if it may not."""
        return None

    @property
    def channel(self) -> S3Destination | None:
        """This destination as the nightly channel's store, where it can be one."""
        return None

    def recorded(self, version: Version) -> Recorded:
        """What the manifest records of it for a release of `version`, besides the keys
        every destination has."""
        return {}


@dataclass(frozen=True, kw_only=True)
class PypiDestination(BaseDestination):
    name: str
    repository_url: str
    index_url: str
    max_file_size: int
    max_project_size: int = PYPI_DEFAULT_PROJECT_GIB * 2**30
    max_growth_percent: int | None = None

    kind: Literal["pypi"] = "pypi"

    KEYS: ClassVar[tuple[str, ...]] = ("repository_url", *WHEEL_KEYS)
    DEFAULT_PROJECT_SIZE: ClassVar[int | None] = PYPI_DEFAULT_PROJECT_GIB * 2**30
    TAKES_SDIST: ClassVar[bool] = True

    def cuda_problem(self, local_label: str | None) -> tuple[str, str] | None:
        if not local_label:
            return None
        return "local-label", (
            f"PyPI rejects local versions (+{local_label}): publish this variant to "
            "a github destination, or drop the label to make it the default variant"
        )

    def twin_problem(self, versions: str, wheel: str) -> str | None:
        return (
            f"CUDA {versions} both send {wheel} to PyPI: only one variant per version "
            "and platform can go to PyPI (give the others a local-label and a github "
            "destination)"
        )

    def torch_problem(self, count: int, cuda: str) -> str | None:
        if count < 2:
            return None
        return (
            f"CUDA {cuda} sends {count} torch versions to PyPI, which takes one "
            "torch per release: send one there, the others to a github destination with "
            "{torch} in their local-label"
        )

    def recorded(self, version: Version) -> Recorded:
        return {"repository_url": self.repository_url}

    @classmethod
    def load(cls, name: str, spec: DestinationSpec, loader: DocumentLoader) -> PypiDestination:
        project_gib = spec.max_project_size_gib
        limit = spec.max_file_size_mib or PYPI_DEFAULT_MAX_MIB
        return cls(
            name=name,
            repository_url=spec.repository_url or "https://upload.pypi.org/legacy/",
            index_url=slash(spec.index_url or "https://pypi.org/simple/"),
            max_file_size=limit * 1024 * 1024,
            max_project_size=(project_gib or PYPI_DEFAULT_PROJECT_GIB) * 2**30,
            max_growth_percent=spec.max_growth_percent,
        )


@dataclass(frozen=True, kw_only=True)
class GithubDestination(BaseDestination):
    name: str
    repository: str
    tag_template: str
    api_url: str
    index_url: str | None
    max_file_size: int
    max_project_size: int | None = None
    max_growth_percent: int | None = None
    # the variable (and repository secret) holding the token that writes here; None:
    # GITHUB_TOKEN, the job's own
    token_secret: str | None = None
    # the git-index destination that lists its wheels (None: the index on GitHub Pages at
    # index_url); index_url is then that index's
    index: str | None = None

    kind: Literal["github"] = "github"

    KEYS: ClassVar[tuple[str, ...]] = (
        "api_url", "repository", "tag", "token_secret", "index", *WHEEL_KEYS
    )  # fmt: skip
    RECORD_NEEDS: ClassVar[tuple[str, ...]] = ("repository", "tag")

    def cuda_problem(self, local_label: str | None) -> tuple[str, str] | None:
        if self.index is None or local_label:
            return None
        return "destination", (
            f"{self.name!r} is listed by the git index {self.index!r}, one folder per "
            "local label: give this copy a local-label (e.g. cu130)"
        )

    def tag(self, version: Version) -> str:
        return self.tag_template.format(version=version.public)

    def version_of_tag(self, tag: str) -> Version | None:
        """The version `tag` names under the tag template (`v{version}`), or None."""
        head, _, tail = self.tag_template.partition("{version}")
        match = re.fullmatch(re.escape(head) + "(.+)" + re.escape(tail), tag)
        if match is None:
            return None
        try:
            return Version(match.group(1))
        except ValueError:  # InvalidVersion, or a number of more digits than int() reads
            return None

    def recorded(self, version: Version) -> Recorded:
        return {
            "repository": self.repository,
            "tag": self.tag(version),
            "api_url": self.api_url,
            "token_secret": self.token_secret,
            "index": self.index,
        }

    @classmethod
    def load(
        cls, name: str, spec: DestinationSpec, loader: DocumentLoader
    ) -> GithubDestination | None:
        path = join_path("destinations", name)
        if spec.repository is None:
            loader.problem(
                join_path(path, "repository"),
                "required key 'repository' is missing for a github destination (owner/name)",
            )
            return None
        if repository_problem(spec.repository):
            loader.problem(
                join_path(path, "repository"),
                f"{shown(spec.repository)} is not a GitHub repository "
                f"({repository_problem(spec.repository)})",
            )
        template = spec.tag or "v{version}"
        others = template.replace("{version}", "")
        if template.count("{version}") != 1 or "{" in others or "}" in others:
            loader.problem(
                join_path(path, "tag"),
                f"{shown(template)} must contain {{version}} once and no other brace",
            )
        elif not is_ref_name(template.replace("{version}", "1.2.3")):
            loader.problem(
                join_path(path, "tag"),
                f"{shown(template)} does not make a git tag (no space, control character, "
                "~ ^ : ? * [ \\, .., @{, or / or . at either end)",
            )
        check_token_secret(name, spec, loader)
        limit = spec.max_file_size_mib or GITHUB_ASSET_MAX_MIB
        project_gib = spec.max_project_size_gib
        return cls(
            name=name,
            repository=spec.repository,
            tag_template=template,
            api_url=(spec.api_url or "https://api.github.com").rstrip("/"),
            index_url=slash(spec.index_url) if spec.index_url else None,
            max_file_size=limit * 1024 * 1024,
            max_project_size=project_gib * 2**30 if project_gib else None,
            max_growth_percent=spec.max_growth_percent,
            token_secret=spec.token_secret,
            index=spec.index,
        )


@dataclass(frozen=True, kw_only=True)
class S3Destination(BaseDestination):
    """S3-compatible object storage (AWS S3, Cloudflare R2, MinIO) holding the nightly
    channel: `/{commit}/` per commit and `/nightly/`, under `prefix` of `bucket`, served to
    pip at `index_url`."""

    name: str
    bucket: str
    prefix: str  # "" or ending in "/"
    endpoint: str | None  # None: AWS
    region: str
    index_url: str  # where `prefix` is served over HTTP, ending in "/"
    max_file_size: int = S3_OBJECT_MAX_MIB * 2**20
    max_project_size: int | None = None
    max_growth_percent: int | None = None

    kind: Literal["s3"] = "s3"

    KEYS: ClassVar[tuple[str, ...]] = ("bucket", "endpoint", "prefix", "region", *WHEEL_KEYS)
    RECORD_NEEDS: ClassVar[tuple[str, ...]] = ("bucket", "index_url")

    def cuda_problem(self, local_label: str | None) -> tuple[str, str] | None:
        return "destination", (
            f"{self.name!r} is an s3 destination, which holds the nightly channel: "
            "send releases to a pypi or github destination and name it under "
            "nightly.destination"
        )

    @property
    def channel(self) -> S3Destination | None:
        return self

    def recorded(self, version: Version) -> Recorded:
        return {
            "bucket": self.bucket,
            "prefix": self.prefix,
            "endpoint": self.endpoint,
            "region": self.region,
        }

    @classmethod
    def load(cls, name: str, spec: DestinationSpec, loader: DocumentLoader) -> S3Destination | None:
        """Its `kind: s3` entry, or None where it is wrong (reported)."""
        path = join_path("destinations", name)
        if spec.bucket is None:
            loader.problem(
                join_path(path, "bucket"), "required key 'bucket' is missing for an s3 destination"
            )
            return None
        before = len(loader.problems)
        for key, message in s3_problems(spec.bucket, spec.endpoint, spec.region):
            loader.problem(join_path(path, "bucket" if key == "storage" else key), message)
        prefix = spec.prefix or ""
        if prefix.startswith("/") or not PREFIX.fullmatch(prefix) or ".." in prefix.split("/"):
            loader.problem(
                join_path(path, "prefix"),
                f"{shown(prefix)}: letters, digits and ._-/ only, not starting with /",
            )
        if len(loader.problems) > before:
            return None
        prefix = with_slash(prefix)
        endpoint = spec.endpoint.rstrip("/") if spec.endpoint else None
        if spec.index_url is not None:
            index_url = slash(spec.index_url)
        elif endpoint is not None:
            index_url = f"{endpoint}/{spec.bucket}/{prefix}"  # path-style, as MinIO serves it
        else:
            index_url = f"https://{spec.bucket}.s3.amazonaws.com/{prefix}"
        limit = spec.max_file_size_mib or S3_OBJECT_MAX_MIB
        project_gib = spec.max_project_size_gib
        return cls(
            name=name,
            bucket=spec.bucket,
            prefix=prefix,
            endpoint=endpoint,
            region=spec.region or "auto",
            index_url=index_url,
            max_file_size=limit * 1024 * 1024,
            max_project_size=project_gib * 2**30 if project_gib else None,
            max_growth_percent=spec.max_growth_percent,
        )


@dataclass(frozen=True, kw_only=True)
class GitIndexDestination(BaseDestination):
    """A directory of a git repository holding the pip index of github destinations' wheels
    (a folder per local label, `cu130/<project>/`, beside other projects' pages), served at
    `index_url`: sgl-project/whl's layout. Each publish is one commit on `branch`. Not a
    place wheels go, so no cell names it: `Matrix.indexes` holds it."""

    name: str
    url: str  # the remote git talks to: https://github.com/OWNER/NAME.git or matrix.yaml's
    repository: str | None  # OWNER/NAME where it is on GitHub
    branch: str
    directory: str  # "" for the repository's root, else a relative path without a slash
    index_url: str  # where `directory` is served, ending in "/"
    token_secret: str | None  # None: GITHUB_TOKEN
    lists: tuple[str, ...]  # the github destinations whose wheels it lists

    kind: Literal["git-index"] = "git-index"

    KEYS: ClassVar[tuple[str, ...]] = ("url", "repository", "branch", "directory", "token_secret")
    RECORD_NEEDS: ClassVar[tuple[str, ...]] = ("url", "branch")

    def cuda_problem(self, local_label: str | None) -> tuple[str, str] | None:
        listed = f" ({', '.join(repr(n) for n in self.lists)})" if self.lists else ""
        return "destination", (
            f"{self.name!r} is a git-index destination, which lists the wheels of a github "
            f"destination: send them to the github destination it lists{listed}"
        )

    def recorded(self, version: Version) -> Recorded:
        return {
            "url": self.url,
            "repository": self.repository,
            "branch": self.branch,
            "directory": self.directory,
            "token_secret": self.token_secret,
        }

    @classmethod
    def load(cls, name: str, spec: DestinationSpec, loader: DocumentLoader) -> GitIndexDestination:
        """Its entry (the destinations it lists are linked once every destination is
        loaded: release.matrix.gitindex.link_indexes)."""
        url, repository, branch, directory = index_place(name, spec, loader)
        index_url = spec.index_url or ""
        return cls(
            name=name,
            url=url,
            repository=repository,
            branch=branch,
            directory=directory,
            index_url=slash(index_url),
            token_secret=spec.token_secret,
            lists=(),
        )


# where a release's wheels go: the kinds a CUDA version may name
Destination = PypiDestination | GithubDestination | S3Destination
DestinationType = type[PypiDestination] | type[GithubDestination] | type[S3Destination]

# kind -> its value type: the tables the loader and the manifest's reader dispatch through,
# the kinds wheels go to and the kinds that list another's wheels
KINDS: Mapping[str, DestinationType] = {
    "pypi": PypiDestination,
    "github": GithubDestination,
    "s3": S3Destination,
}
# a destination that lists other destinations' wheels (a cell names none): the value types
# of INDEX_KINDS
IndexDestination = GitIndexDestination
INDEX_KINDS: Mapping[str, type[IndexDestination]] = {
    "git-index": GitIndexDestination,
}


def key_owners() -> dict[str, list[str]]:
    """Each key some kinds own, with those kinds (in the tables' order)."""
    owners: dict[str, list[str]] = {}
    for kind, value_type in [*KINDS.items(), *INDEX_KINDS.items()]:
        for key in value_type.KEYS:
            owners.setdefault(key, []).append(kind)
    return owners


# a destination's name reaches messages, the manifest and the workflow's job names
_DESTINATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def destination_name_problem(name: str) -> str | None:
    """Why `name` cannot name a destination (letters, digits, `.`, `_` and `-`, starting
    with a letter or digit, at most 64); None when it can."""
    if _DESTINATION_NAME.fullmatch(name):
        return None
    return (
        f"{shown(name)} is not a destination's name (letters, digits, ., _ and -, starting "
        "with a letter or a digit, at most 64)"
    )


def kinds_text() -> str:
    """`pypi, github or s3`."""
    names = list(KINDS)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"
