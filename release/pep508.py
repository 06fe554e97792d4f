"""The one reader of requirement text this tool did not write (a wheel's or an index's
METADATA, a project's files): packaging's Requirement, except that a number of more digits
than any release holds is refused with the text packaging refuses. packaging parses such a
line and then fails comparing it (int() of more than 4,300 digits is a ValueError, not the
InvalidRequirement or InvalidVersion a caller expects), as pip fails on it. Where a
requirement applies (`applies`, in a cell's Linux marker environment: `linux_environment`),
and whether two requirements on one package leave room for a version of it (`exclusion`):
pip refuses to install a torch, or a frontend, whose own requirement excludes a project's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

MAX_DIGITS = 32  # of one number in a requirement; no release, Python or CUDA has more
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_DIGITS + 1},}}")


def requirement(text: str) -> Requirement:
    """packaging's Requirement of `text`; InvalidRequirement where packaging refuses it or
    where a number in it has more than MAX_DIGITS digits."""
    long = _LONG_NUMBER.search(text)
    if long is not None:
        raise InvalidRequirement(
            f"it holds a number of {len(long.group())} digits, which no installer reads"
        )
    return Requirement(text)


def readable(texts: Iterable[str]) -> list[Requirement]:
    """The requirements among `texts` that parse, in order; one that does not is left out
    (whoever reads the file whole names it: pip, matrix.yaml's loader)."""
    found = []
    for text in texts:
        try:
            found.append(requirement(text))
        except InvalidRequirement:
            continue
    return found


def linux_environment(arch: str | None, python: str | None) -> dict[str, str]:
    """The marker environment of the cells' platform: Linux on `arch` (None: any), with
    their Python where one is named."""
    env = {"platform_system": "Linux", "sys_platform": "linux", "os_name": "posix", "extra": ""}
    if arch is not None:
        env["platform_machine"] = arch
    if python is not None:
        env |= {"python_version": python, "python_full_version": f"{python}.0"}
    return env


def applies(requirement: Requirement, env: Mapping[str, str]) -> bool:
    """Whether `requirement` applies in the marker environment `env` (a marker that names
    a variable `env` leaves out counts as applying)."""
    try:
        return requirement.marker is None or requirement.marker.evaluate(dict(env))
    except UndefinedEnvironmentName:
        return True


_BELOW = 99999  # a component past any a release uses: 74.99999 stands for "just below 75"


def _beside(version: Version) -> list[Version]:
    """`version`, one just above it and one just below it (where one is), of its epoch."""
    release, epoch = version.release, f"{version.epoch}!"

    def of(parts: tuple[int, ...]) -> Version:
        return Version(epoch + ".".join(map(str, parts)))

    near = [version, of((*release, 1))]
    last = max((i for i, n in enumerate(release) if n), default=None)
    if last is not None:
        near.append(of((*release[:last], release[last] - 1, _BELOW)))
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
