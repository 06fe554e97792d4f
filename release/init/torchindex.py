"""Which torch `release init` pins: the newest final release on the index that the build
requirement allows and that has a Linux wheel for the cells' CPU arch; and whether a
release's own requirements leave room for the project's build requirements, which its
build environment installs beside it (torch 2.13.0 requires setuptools>=77.0.3, which
SageAttention's setuptools<75 excludes: release.pep508.exclusion). Pure: the index's
project page and a release's requirements in (release.remote.simple_index,
release.inspection.torchcuda), versions and reasons out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.inspection.torchcuda import cpythons, page_releases
from release.pep508 import exclusion
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
