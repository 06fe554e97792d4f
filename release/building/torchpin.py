"""The torch a torch extension wheel needs, written into its METADATA.

A wheel built against torch's C++ ABI loads beside that torch release only (`torch==X.Y.*`);
one built for libtorch's stable ABI loads beside every torch from the TORCH_TARGET_VERSION
it was compiled with (`torch>=X.Y`). `pinned` makes the wheel say so: a project's own torch
requirement that is at least as narrow is kept, a wider one is narrowed (its other bounds
kept), a missing one is added, and one the build contradicts is an error.

Pure and deterministic like release.building.relabel, whose rewriting it shares: METADATA's
`Requires-Dist` lines and RECORD's row for METADATA change, nothing else; members keep
their order, dates, modes and compression.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier
from packaging.utils import canonicalize_name
from packaging.version import Version

from release import pep508
from release.project.stableabi import target_version
from release.wheelrewrite import rewritten_record, rewritten_wheel


class TorchPinError(ValueError):
    """The wheel cannot say which torch it needs (the message says why)."""


def torch_requirement(torch_version: Version, stable_target: Version | None) -> Requirement:
    """`torch==X.Y.*` of the torch built against (its local label such as +cu130 left
    out); for a stable-ABI build, `torch>=X.Y` of its target version."""
    if stable_target is None:
        major, minor = (*torch_version.release, 0)[:2]
        return Requirement(f"torch=={major}.{minor}.*")
    major, minor, micro = (*stable_target.release, 0, 0)[:3]
    return Requirement(f"torch>={major}.{minor}" + (f".{micro}" if micro else ""))


_TARGET_DEFINE = re.compile(
    r"-D\s*TORCH_TARGET_VERSION=(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*(?![0-9A-Za-z_.])"
)


def stable_target_version(build_log: str) -> Version | None:
    """The TORCH_TARGET_VERSION the compile lines of `build_log` define (torch's
    cpp_extension runs `ninja -v`), or None where none does (the value's layout:
    release.project.stableabi.target_version). Two different
    values in one log raise ValueError."""
    found: dict[Version, str] = {}
    for match in _TARGET_DEFINE.finditer(build_log):
        version = target_version(match.group(1))
        if version is None:
            raise ValueError(
                f"the build compiled with TORCH_TARGET_VERSION={match.group(1)}, which is not "
                "a C integer of 64 bits (a leading 0 makes it octal)"
            )
        found.setdefault(version, match.group(1))
    if len(found) > 1:
        values = " and ".join(f"{raw} ({version})" for version, raw in sorted(found.items()))
        raise ValueError(f"the build compiled with two TORCH_TARGET_VERSION values: {values}")
    return next(iter(found), None)


@dataclass(frozen=True)
class _Interval:
    """The versions a specifier set allows, as one interval; None is unbounded."""

    low: tuple[Version, bool] | None = None  # (version, inclusive)
    high: tuple[Version, bool] | None = None

    def meet(self, other: _Interval) -> _Interval:
        lows = [b for b in (self.low, other.low) if b is not None]
        highs = [b for b in (self.high, other.high) if b is not None]
        # at equal versions the exclusive bound is the narrower one
        low = max(lows, key=lambda b: (b[0], not b[1]), default=None)
        high = min(highs, key=lambda b: (b[0], b[1]), default=None)
        return _Interval(low, high)

    def empty(self) -> bool:
        if self.low is None or self.high is None:
            return False
        (low, low_in), (high, high_in) = self.low, self.high
        return low > high or (low == high and not (low_in and high_in))

    def within(self, other: _Interval) -> bool:
        if other.low is not None:
            if self.low is None or self.low[0] < other.low[0]:
                return False
            if self.low[0] == other.low[0] and self.low[1] and not other.low[1]:
                return False
        if other.high is not None:
            if self.high is None or self.high[0] > other.high[0]:
                return False
            if self.high[0] == other.high[0] and self.high[1] and not other.high[1]:
                return False
        return True


def _next_dev(release: tuple[int, ...]) -> Version:
    """The first version after every version that starts with `release`."""
    return Version(".".join(map(str, (*release[:-1], release[-1] + 1))) + ".dev0")


def _interval(spec: Specifier) -> _Interval:
    """The versions `spec` allows, ignoring what only removes single versions (`!=`, and
    `>V` leaving out V's post-releases): the project's specifier is read a little wider than
    it is, which errs towards narrowing it."""
    operator, text = spec.operator, spec.version
    if operator == "!=":
        return _Interval()
    if operator == "==" and text.endswith(".*"):
        prefix = Version(text[:-2]).release
        return _Interval((Version(text[:-2] + ".dev0"), True), (_next_dev(prefix), False))
    try:
        version = Version(text)
    except (
        ValueError
    ):  # an `===` of something that is no version (InvalidVersion, or digits past int())
        return _Interval()
    if operator in ("==", "==="):
        return _Interval((version, True), (version, True))
    if operator == "~=":
        return _Interval((version, True), (_next_dev(version.release[:-1]), False))
    if operator == "<" and not (version.is_prerelease or version.is_postrelease):
        # `<2.14` allows no pre-release of 2.14 either (PEP 440)
        return _Interval(high=(Version(version.base_version + ".dev0"), False))
    return {
        ">=": _Interval(low=(version, True)),
        ">": _Interval(low=(version, False)),
        "<=": _Interval(high=(version, True)),
        "<": _Interval(high=(version, False)),
    }[operator]


def _allowed(specs: Iterable[Specifier]) -> _Interval:
    interval = _Interval()
    for spec in specs:
        interval = interval.meet(_interval(spec))
    return interval


def within(requirement: Requirement, pin: Requirement) -> bool:
    """Whether every version `requirement` allows is one `pin` allows (`!=` read as
    allowing all: see `_interval`)."""
    return _allowed(requirement.specifier).within(_allowed(pin.specifier))


def _still_bounds(spec: Specifier, pinned_to: _Interval) -> bool:
    """Whether the project's `spec` still removes versions the pin allows."""
    if spec.operator == "!=":
        excluded = _interval(Specifier(f"=={spec.version}"))
        return not excluded.meet(pinned_to).empty()
    return not pinned_to.within(_interval(spec))


def _repinned(
    project: Requirement, pin: Requirement, wheel_name: str, built_with: Version | None
) -> Requirement | None:
    """The requirement that replaces the project's `project` (None: keep it)."""
    wanted, pinned_to = _allowed(project.specifier), _allowed(pin.specifier)
    built = f"was built against torch {built_with} and " if built_with is not None else ""
    if wanted.meet(pinned_to).empty():
        raise TorchPinError(
            f"{wheel_name}: the project requires {project}, but the wheel {built}needs {pin}: "
            "no torch satisfies both"
        )
    if built_with is not None and not project.specifier.contains(built_with, prereleases=True):
        raise TorchPinError(
            f"{wheel_name}: the project requires {project}, which leaves out torch "
            f"{built_with}, the torch the wheel was built against"
        )
    if wanted.within(pinned_to):
        return None
    kept = [s for s in project.specifier if _still_bounds(s, pinned_to)]
    specifier = ",".join(sorted(map(str, pin.specifier)) + sorted(map(str, kept)))
    extras = f"[{','.join(sorted(project.extras))}]" if project.extras else ""
    marker = f"; {project.marker}" if project.marker is not None else ""
    return Requirement(f"{project.name}{extras}{specifier}{marker}")


_REQUIRES_DIST = re.compile(rb"^Requires-Dist:[ \t]*(?P<value>[^\r\n]*)", re.IGNORECASE)
_EXTRA = re.compile(r"\bextra\b")


def _torch_requirement_of(line: bytes) -> Requirement | None:
    """The torch requirement of a METADATA line that is one, outside every extra."""
    match = _REQUIRES_DIST.match(line)
    if match is None:
        return None
    try:
        requirement = pep508.requirement(match.group("value").decode("utf-8").strip())
    except (InvalidRequirement, UnicodeDecodeError):
        return None
    if canonicalize_name(requirement.name) != "torch" or requirement.url is not None:
        return None
    if requirement.marker is not None and _EXTRA.search(str(requirement.marker)):
        return None
    return requirement


def metadata_pinned(
    metadata: bytes, requirement: Requirement, wheel_name: str, built_with: Version | None
) -> bytes:
    """METADATA with its torch requirements held to `requirement` (see `pinned`)."""
    lines = metadata.splitlines(keepends=True)
    header_end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    found = False
    last_requirement = -1
    for index in range(header_end):
        line = lines[index]
        if _REQUIRES_DIST.match(line):
            last_requirement = index
        project = _torch_requirement_of(line)
        if project is None:
            continue
        found = True
        replacement = _repinned(project, requirement, wheel_name, built_with)
        if replacement is not None:
            ending = line[len(line.rstrip(b"\r\n")) :]
            lines[index] = f"Requires-Dist: {replacement}".encode() + ending
    if not found:
        at = last_requirement + 1 if last_requirement >= 0 else header_end
        ending = b"\r\n" if lines and lines[0].endswith(b"\r\n") else b"\n"
        if at > 0 and not lines[at - 1].endswith((b"\n", b"\r")):
            lines[at - 1] += ending
        lines.insert(at, f"Requires-Dist: {requirement}".encode() + ending)
    return b"".join(lines)


def pinned(
    wheel_name: str,
    wheel_data: bytes,
    requirement: Requirement,
    *,
    built_with: Version | None = None,
) -> bytes:
    """The wheel `wheel_data` with METADATA requiring `requirement` (`torch_requirement`):
    the project's torch requirement where every version it allows is one `requirement`
    allows, `requirement` (with the project's other bounds, extras and marker) where the
    project's is wider, `requirement` added where the project has none. Requirements under
    an `extra ==` marker are left alone. A project requirement that no version of
    `requirement` satisfies, or that leaves out `built_with` (the torch the wheel was
    built against), raises TorchPinError; so does a wheel that cannot be read."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(wheel_data))
    except zipfile.BadZipFile:
        raise TorchPinError(f"{wheel_name} is not a zip archive") from None
    with archive:
        tops = {info.filename.split("/", 1)[0] for info in archive.infolist()}
        dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
        if len(dist_infos) != 1:
            raise TorchPinError(f"{wheel_name} has {len(dist_infos)} .dist-info folders, not 1")
        metadata_name = f"{dist_infos[0]}/METADATA"
        record_name = f"{dist_infos[0]}/RECORD"
        try:
            metadata = archive.read(metadata_name)
            record = archive.read(record_name)
        except KeyError as missing:
            raise TorchPinError(f"{wheel_name} has no {missing.args[0]}") from None
        new_metadata = metadata_pinned(metadata, requirement, wheel_name, built_with)
        if new_metadata == metadata:
            return wheel_data
        new_record = rewritten_record(record, {}, (metadata_name, new_metadata))
        return rewritten_wheel(archive, {}, {metadata_name: new_metadata, record_name: new_record})
