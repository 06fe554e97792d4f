"""How much each wheel grew since the previous release, for `release plan`.

Pure core: a wheel is matched to the previous release's by what stays the same from one
version to the next (destination, arch, local label and the filename without its version:
the distribution and the python, abi and platform tags); its growth in bytes and percent;
the wheels over a destination's `max-growth-percent`. Edge: the previous release's
`release-manifest.json`, from a file (`--previous-manifest`) or from the first destination
of the cells whose kind keeps each release's (GitHub: the highest published version below
this one whose release has one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release.destinations.reach import Reach
from release.destinations.registry import kind_of
from release.errors import ConfigError, FileError, PublishError
from release.fsutil import read_document
from release.inspection.budget import size_text
from release.matrix import Cell
from release.records.manifest import WheelEntry
from release.records.release_manifest import (
    RELEASE_MANIFEST,
    PreviousRelease,
    previous_release,
)
from release.wheelfile import WheelName

NO_PREVIOUS = "no previous release"


@dataclass(frozen=True, kw_only=True)
class Growth:
    previous_wheel: str
    previous_size: int
    size: int

    @property
    def bytes(self) -> int:
        return self.size - self.previous_size

    @property
    def percent(self) -> float | None:
        """None when the previous wheel was empty (no percentage of nothing)."""
        return 100 * self.bytes / self.previous_size if self.previous_size else None

    @property
    def text(self) -> str:
        """`+1.2 MiB (+3.4%)`."""
        sign = "+" if self.bytes >= 0 else "-"
        percent = f" ({self.percent:+.1f}%)" if self.percent is not None else ""
        return f"{sign}{size_text(abs(self.bytes))}{percent}"


def match_key(
    filename: str, *, destination: str, arch: str, local_label: str | None
) -> tuple[str, ...]:
    """What a wheel has in common with its counterpart of another version."""
    return (destination, arch, local_label or "", *WheelName.parse(filename).unversioned)


def growth_by_wheel(entries: Sequence[WheelEntry], previous: PreviousRelease) -> dict[str, Growth]:
    """Each built wheel's growth against its counterpart in `previous`, where it has one."""
    before = {
        match_key(w.filename, destination=w.destination, arch=w.arch, local_label=w.local_label): w
        for w in previous.wheels
    }
    out = {}
    for entry in entries:
        key = match_key(
            entry.filename,
            destination=entry.destination.name,
            arch=entry.arch,
            local_label=entry.local_label,
        )
        match = before.get(key)
        if match is not None:
            out[entry.filename] = Growth(
                previous_wheel=match.filename, previous_size=match.size, size=entry.size
            )
    return out


def growth_problem(
    wheel: str, growth: Growth, *, limit: int | None, destination: str, previous: str
) -> str | None:
    """Why a wheel grew too much since `previous`, if it did."""
    if limit is None or growth.bytes <= 0:
        return None
    if growth.percent is not None and growth.percent <= limit:
        return None
    return (
        f"{wheel} grew {growth.text} since {previous} ({growth.previous_wheel}), over "
        f"{destination}'s max-growth-percent of {limit}%"
    )


# --- The previous release (edge). ---


def read_previous(path: Path) -> PreviousRelease:
    """`--previous-manifest FILE`: a regular file, read as far as a document may be (a FIFO,
    /dev/zero or a file of gigabytes is one line naming the option, never held whole)."""
    try:
        data = read_document(path)
    except OSError as error:
        raise FileError.of(error, "read --previous-manifest") from None
    try:
        return previous_release(data, source=str(path))
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(
            [f"--previous-manifest {path}: not a {RELEASE_MANIFEST} ({error})"],
            hint=f"give the {RELEASE_MANIFEST} asset of the previous GitHub release",
        ) from None


def find_previous(
    cells: Sequence[Cell], *, manifest: Path | None, reach: Reach
) -> tuple[PreviousRelease | None, str]:
    """The previous release and a line saying what it is, or why there is none: from
    `manifest` when given, else from the first destination of the cells whose kind keeps
    each release's release-manifest.json (GitHub); one that cannot be asked leaves the
    plan without growth, saying so."""
    if manifest is not None:
        given = read_previous(manifest)
        return given, f"previous release: {given.version} ({given.source})"
    version = cells[0].project.version
    places = [copy.destination for c in cells for copy in c.copies]
    keeper = next((d for d in places if kind_of(d.kind).keeps_releases(d)), None)
    if keeper is None:
        return None, (
            f"{NO_PREVIOUS} (no GitHub destination to find it on; "
            f"--previous-manifest FILE gives its {RELEASE_MANIFEST})"
        )
    kind = kind_of(keeper.kind)
    try:
        previous = kind.previous_release(keeper, version, reach)
    except PublishError as error:
        return None, f"previous release not read, no growth shown: {error.message}"
    if previous is None:
        return None, (
            f"{NO_PREVIOUS} (no published release of {kind.keeps_releases(keeper)} below "
            f"{version.public} has a {RELEASE_MANIFEST})"
        )
    return previous, f"previous release: {previous.version} ({previous.source})"
