"""The shared libraries a wheel's runtime dependencies provide: the wheel may need them
(DT_NEEDED) without bundling them, because whoever installs it gets them with those
distributions (libtorch with torch, libtvm_ffi.so with apache-tvm-ffi, libcudart.so.13
with nvidia-cuda-runtime). Which distribution provides which soname is read from the
installed distributions' RECORD files, never from a list: the distributions the wheel's
Requires-Dist reaches, with their own requirements, markers evaluated for the cell.

Pure: `wheel_requirements`, `marker_environment`, `reached`, `provided_by`,
`library_dirs`. Edge:
`installed_distributions` reads a site-packages directory (importlib.metadata).
"""

from __future__ import annotations

import email.parser
import importlib.metadata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from release import pep508
from release.inspection.devicecode import is_shared_object
from release.wheelfile import wheel_facts


@dataclass(frozen=True, kw_only=True)
class Installed:
    """An installed distribution as this reads it: its name, its requirements (Requires-Dist),
    the file names of the shared libraries its RECORD lists and the directories they lie in."""

    name: str
    requires: tuple[str, ...]
    libraries: frozenset[str]
    library_dirs: frozenset[Path] = frozenset()


def installed_distributions(site_packages: Path) -> dict[str, Installed]:
    """The distributions installed in `site_packages`, by canonical name."""
    found: dict[str, Installed] = {}
    for dist in importlib.metadata.distributions(path=[str(site_packages)]):
        name = dist.metadata["Name"]
        if not name or canonicalize_name(name) in found:
            continue  # a second copy of a name is not what the loader finds first
        files = [file for file in dist.files or () if is_shared_object(file.name)]
        found[canonicalize_name(name)] = Installed(
            name=name,
            requires=tuple(dist.requires or ()),
            libraries=frozenset(file.name for file in files),
            library_dirs=frozenset(Path(str(dist.locate_file(file))).parent for file in files),
        )
    return found


def wheel_requirements(wheel_data: bytes) -> tuple[str, ...]:
    """The Requires-Dist of the wheel `wheel_data`'s METADATA (none where it has none)."""
    metadata = wheel_facts(wheel_data).metadata or b""
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    return tuple(str(value).strip() for value in headers.get_all("Requires-Dist") or ())


def marker_environment(python: str, arch: str) -> dict[str, str]:
    """The environment markers are evaluated in: a Linux CPython `python` ("3.11") on `arch`."""
    environment = {key: str(value) for key, value in default_environment().items()}
    environment.update(
        python_version=python,
        python_full_version=f"{python}.0",
        platform_machine=arch,
        platform_system="Linux",
        sys_platform="linux",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return environment


def _applies(requirement: Requirement, extras: Iterable[str], env: Mapping[str, str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**env, "extra": extra}) for extra in ("", *extras))


def reached(
    requirements: Sequence[str], installed: Mapping[str, Installed], env: Mapping[str, str]
) -> tuple[Installed, ...]:
    """The installed distributions `requirements` reach, with the requirements of each in
    turn (its extras' too where asked for), each once, in the order first reached. A
    requirement whose markers are false, or that names nothing installed, reaches nothing."""
    order: list[Installed] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    pending: list[tuple[str, frozenset[str]]] = [(text, frozenset()) for text in requirements]
    while pending:
        text, from_extras = pending.pop(0)
        try:
            requirement = pep508.requirement(text)
        except InvalidRequirement:
            continue
        if not _applies(requirement, from_extras, env):
            continue
        name = canonicalize_name(requirement.name)
        extras = frozenset(requirement.extras)
        dist = installed.get(name)
        if dist is None or (name, extras) in seen:
            continue
        seen.add((name, extras))
        if dist not in order:
            order.append(dist)
        pending += [(child, extras) for child in dist.requires]
    return tuple(order)


def provided_by(
    requirements: Sequence[str], installed: Mapping[str, Installed], env: Mapping[str, str]
) -> dict[str, str]:
    """Each shared library the distributions `requirements` reach provide, by file name
    (the soname a DT_NEEDED entry asks the loader for), with the distribution's name."""
    provided: dict[str, str] = {}
    for dist in reached(requirements, installed, env):
        for library in sorted(dist.libraries):
            provided.setdefault(library, dist.name)
    return provided


def library_dirs(
    requirements: Sequence[str], installed: Mapping[str, Installed], env: Mapping[str, str]
) -> dict[str, tuple[Path, ...]]:
    """The directories of the shared libraries of each distribution `requirements` reach
    that has any, by its name: where the loader finds what a wheel that requires them
    leaves undefined (libtvm_ffi.so's symbols beside apache-tvm-ffi)."""
    return {
        dist.name: tuple(sorted(dist.library_dirs))
        for dist in reached(requirements, installed, env)
        if dist.library_dirs
    }
