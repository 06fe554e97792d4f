"""Which torch `release init` pins: the newest final release on the index that the build
requirement allows and that has a Linux wheel for the cells' CPU arch. Pure: the index's
project page in (release.remote.simple_index), versions out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

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
