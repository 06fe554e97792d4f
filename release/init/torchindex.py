"""Which torch `release init` pins: the newest final release on the index that the build
requirement allows and that has a Linux wheel for the cells' CPU arch; and whether a
release's own requirements leave room for the project's build requirements, which its
build environment installs beside it (torch 2.13.0 requires setuptools>=77.0.3, which
SageAttention's setuptools<75 excludes). Pure: the index's project page and a release's
requirements in (release.remote.simple_index, release.inspection.torchcuda), versions and
reasons out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.inspection.torchcuda import cpythons, page_releases
from release.remote.simple_index import ListedFile


@dataclass(frozen=True, kw_only=True)
class TorchRelease:
    version: Version
    pythons: tuple[str, ...]  # the CPythons it has wheels for ("3.10", ...), oldest first


def torch_releases(files: Mapping[str, ListedFile], arch: str) -> dict[Version, TorchRelease]:
    """The releases a torch project page lists Linux `arch` wheels for (yanked files left
    out), each with the CPython versions of those wheels. A local label is dropped
    (PyTorch's index says 2.9.1+cu129): `torch==2.9.1` installs it from there."""
    return {
        version: TorchRelease(version=version, pythons=cpythons(release))
        for version, release in page_releases(files, arch).items()
    }


def newest_allowed(
    releases: Mapping[Version, TorchRelease], specifier: SpecifierSet
) -> TorchRelease | None:
    """The newest final release (no pre-release) `specifier` allows."""
    allowed = [
        v for v in releases if not v.is_prerelease and specifier.contains(v, prereleases=False)
    ]
    return releases[max(allowed)] if allowed else None


_BELOW = 99999  # a component past any a release uses: 74.99999 stands for "just below 75"


def _beside(version: Version) -> list[Version]:
    """`version`, one just above it and one just below it (where one is)."""
    release = version.release
    near = [version, Version(".".join(map(str, (*release, 1))))]
    last = max((i for i, n in enumerate(release) if n), default=None)
    if last is not None:
        below = (*release[:last], release[last] - 1, _BELOW)
        near.append(Version(".".join(map(str, below))))
    return near


def can_meet_both(first: SpecifierSet, second: SpecifierSet) -> bool:
    """Whether some final release meets both specifier sets. The sets' bounds are tried, and
    the versions just above and just below each (a bound that excludes another is then
    shown at one of them); an arbitrary (`===`) or unreadable one is taken to leave room."""
    both = first & second
    tried: list[Version] = []
    for spec in both:
        if spec.operator == "===":
            return True
        try:
            tried += _beside(Version(spec.version.removesuffix(".*")))
        except InvalidVersion:
            return True
    return not tried or any(both.contains(v, prereleases=False) for v in tried)


def exclusion(
    requires: Sequence[Requirement], build: Sequence[tuple[Requirement, str]]
) -> tuple[Requirement, Requirement, str] | None:
    """The first of `requires` (a torch release's, or the frontend's) that no version meets
    together with one of the build requirements (`build`: each with where it is written):
    (theirs, ours, where); None where none is."""
    for theirs in requires:
        for ours, where in build:
            if canonicalize_name(theirs.name) != canonicalize_name(ours.name):
                continue
            if not can_meet_both(theirs.specifier, ours.specifier):
                return theirs, ours, where
    return None


def excluded_by(
    torch_requires: Sequence[Requirement], build: Sequence[tuple[Requirement, str]]
) -> str | None:
    """Why a torch release cannot be installed beside the build requirements, in words;
    None where nothing excludes it."""
    found = exclusion(torch_requires, build)
    if found is None:
        return None
    theirs, ours, where = found
    return f"it requires {theirs.name}{theirs.specifier}, which {ours} ({where}) excludes"
