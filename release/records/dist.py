"""The release artifact: the manifest(s) in a dist directory and the wheels beside them.

Plan, publish and verify start here: `load_dist` reads the manifest (or the manifests of
several build jobs, merged) and checks every entry against its wheel before anything else
happens: the filename's project and version against the manifest's, the wheel's METADATA
against its filename, and size and sha256 against what the build recorded. A dist that
fails is refused as a whole, with every problem named. `write_rebuilt` is the one change
publish makes to it: a wheel published under a build tag takes the place of the one it
was rewritten from.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from release.errors import ConfigError, FileError
from release.fsutil import sha256_file, write_atomic
from release.matrix import Cell, Commit
from release.records.manifest import (
    MANIFEST_NAME,
    DestinationRef,
    Manifest,
    SdistEntry,
    WheelEntry,
    read_manifest,
    read_manifests,
    write_manifest,
)
from release.records.sdistfile import sdist_archive_problems
from release.wheelfile import (
    NotAWheel,
    WheelFacts,
    WheelName,
    identity_problems,
    read_wheel,
    tag_problems,
)


def manifest_paths(dist: Path) -> list[Path]:
    """`<dist>/manifest.json`, else every `<dist>/manifest*.json` (one per build job, the
    wheels of all jobs downloaded into the same directory), merged by `read_manifests`."""
    top = dist / MANIFEST_NAME
    if top.is_file():
        return [top]
    found = sorted(dist.glob("manifest*.json"))
    if not found:
        raise FileError(
            f"{top}: no such file", hint="run `release build` first, or pass --dist DIR"
        )
    return found


def entry_problems(manifest: Manifest, entry: WheelEntry, facts: WheelFacts | None) -> list[str]:
    """Why `entry` does not describe its wheel (`facts`, None when the file is missing).
    Pure: the digest is checked by the caller."""
    name = entry.filename
    try:
        wheel = WheelName.parse(name)
    except NotAWheel as error:
        return [f"{name}: not a wheel filename ({error.detail})"]
    project, version = wheel.project, wheel.version
    problems = []
    if project != canonicalize_name(manifest.project):
        problems.append(f"{name}: the manifest is for {manifest.project}")
    try:
        public = Version(manifest.version)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return [f"the manifest's version {manifest.version[:40]!r} is not PEP 440"]
    if version.public != str(public):
        problems.append(f"{name}: version {version}, the manifest releases {manifest.version}")
    if str(version) != entry.version or (version.local or None) != entry.local_label:
        problems.append(f"{name}: the manifest entry says version {entry.version}")
    if facts is None:
        return [*problems, f"{name} is missing (the manifest lists it)"]
    if facts.unreadable:
        return [*problems, f"{name}: {facts.unreadable}"]
    if facts.size != entry.size:
        problems.append(f"{name} is {facts.size} bytes, the manifest says {entry.size}")
    identity = identity_problems(project, version, facts.metadata_name, facts.metadata_version)
    # a wheel renamed py3-none-any with its entry (its bytes unchanged) is another wheel
    tags = tag_problems(facts.wheel_tags, wheel.tags)
    return problems + [f"{name}: {problem}" for problem in (*identity, *tags)]


def wheel_problem(entry: WheelEntry | SdistEntry, wheel: Path) -> str | None:
    """Why the file at `wheel` is not the one the manifest records (size, sha256), if not."""
    try:
        facts = wheel.stat()
    except FileNotFoundError:
        return f"{wheel} is missing (the manifest lists it)"
    except OSError as error:
        return f"{wheel} cannot be read: {error.strerror}"
    if not stat.S_ISREG(facts.st_mode):  # a FIFO would never end its read
        return f"{wheel} is not a file (a directory, a FIFO or a device): the manifest lists it"
    size = facts.st_size
    if size != entry.size:
        return f"{wheel.name} is {size} bytes, the manifest says {entry.size}"
    digest = sha256_file(wheel)
    if digest != entry.sha256:
        return f"{wheel.name} has sha256 {digest[:12]}..., the manifest says {entry.sha256[:12]}..."
    return None


def dist_problems(
    manifest: Manifest, dist: Path, entries: Iterable[WheelEntry], *, missing_ok: bool = False
) -> list[str]:
    """Every way the wheels in `dist` differ from what the manifest says of `entries`;
    with `missing_ok`, a wheel that is not there is no problem (verify reads the manifest
    and the publish record alone), one that is there must still match."""
    problems = []
    for entry in entries:
        wheel = dist / entry.filename
        facts = read_wheel(wheel) if wheel.is_file() else None
        found = entry_problems(manifest, entry, facts)
        if facts is None and missing_ok:
            found = [p for p in found if not p.endswith("is missing (the manifest lists it)")]
        if not found and facts is not None:
            problem = wheel_problem(entry, wheel)
            if problem is not None:
                found.append(problem)
        problems += found
    return problems


def sdist_problems(manifest: Manifest, dist: Path, *, missing_ok: bool = False) -> list[str]:
    """How the sdist in `dist` differs from the manifest's entry (none without one): its
    name and version are the release's (PEP 625), it goes where wheels of the release go
    (publish sends it with them, verify checks it there), its size and sha256 are the
    recorded ones, and it is an sdist of the release (`sdist_archive_problems`)."""
    sdist = manifest.sdist
    if sdist is None:
        return []
    name = canonicalize_name(manifest.project).replace("-", "_")
    expected = f"{name}-{manifest.version}.tar.gz"
    if sdist.filename != expected or sdist.version != manifest.version:
        return [f"{sdist.filename}: the manifest releases {expected}"]
    destination = sdist_destination_problem(manifest)
    if destination is not None:
        return [destination]
    path = dist / sdist.filename
    if missing_ok and not path.exists():
        return []
    problem = wheel_problem(sdist, path)
    if problem is not None:
        return [problem]
    return sdist_archive_problems(
        path.read_bytes(), sdist.filename, manifest.project, sdist.version
    )


def sdist_destination_problem(manifest: Manifest) -> str | None:
    """Why the manifest's sdist goes where none of its wheels go, if it does: publish sends
    it with its destination's wheels, and verify checks it there."""
    sdist = manifest.sdist
    if sdist is None or sdist.destination in {w.destination for w in manifest.wheels}:
        return None
    return (
        f"{MANIFEST_NAME}: the sdist {sdist.filename} goes to {sdist.destination.name!r}, "
        "where none of the release's wheels go (publish sends it with them)"
    )


def load_dist(dist: Path, *, missing_ok: bool = False) -> Manifest:
    """The manifest of `dist`, checked against its wheels and its sdist; ConfigError
    naming every problem when they disagree."""
    manifest = read_manifests(manifest_paths(dist))
    problems = dist_problems(manifest, dist, manifest.wheels, missing_ok=missing_ok)
    problems += sdist_problems(manifest, dist, missing_ok=missing_ok)
    if problems:
        raise ConfigError(
            [f"{dist}: {p}" for p in problems],
            hint="the wheels are not the ones this manifest records: rebuild with "
            "`release build`, or restore the dist directory",
        )
    return manifest


def write_rebuilt(dist: Path, rebuilt: Mapping[str, tuple[WheelEntry, Path]]) -> None:
    """dist/ with each wheel `rebuilt` names (by its filename) replaced by its rebuild as
    published (`publish --build-tag`: its entry, and the file holding its bytes): the
    rebuild's file written, every manifest that listed the wheel naming the rebuild
    instead, then the wheel removed, so that dist/ holds what its manifests list."""
    if not rebuilt:
        return
    for entry, source in rebuilt.values():
        write_atomic(dist / entry.filename, source.read_bytes())
    for path in manifest_paths(dist):
        manifest = read_manifest(path)
        if any(w.filename in rebuilt for w in manifest.wheels):
            wheels = tuple(
                rebuilt[w.filename][0] if w.filename in rebuilt else w for w in manifest.wheels
            )
            write_manifest(replace(manifest, wheels=wheels), path)
    for name in rebuilt:
        (dist / name).unlink(missing_ok=True)


@dataclass(frozen=True, kw_only=True)
class Reconciled:
    """The manifest after a build, and what happened to what dist/ held before."""

    manifest: Manifest
    kept: tuple[str, ...]  # filenames kept from an earlier build of this version
    dropped: tuple[str, ...]  # "filename: why", entries of the earlier manifest left out


def reconcile(
    previous: Manifest | None,
    built: Sequence[WheelEntry],
    *,
    project: str,
    version: str,
    attempted: Iterable[str],
    cells: Mapping[str, Cell],
    intact: Callable[[WheelEntry], bool],
    epoch: int,
    commit: Commit | None = None,
) -> Reconciled:
    """The manifest of dist/ after this build: exactly the wheels built now, plus entries
    of an earlier build of the same version for cells this build did not attempt (a
    filtered build adding to dist/), where the matrix still has that cell unchanged and
    `intact` confirms the wheel in dist/ is the one recorded."""
    tried = set(attempted)
    kept: list[WheelEntry] = []
    dropped: list[str] = []
    same_release = previous is not None and (previous.project, previous.version) == (
        project,
        version,
    )
    for entry in previous.wheels if previous is not None else ():
        cell = cells.get(entry.cell)
        copy = _copy_named(cell, entry.filename) if cell is not None else None
        if not same_release:
            dropped.append(f"{entry.filename}: another version ({entry.version})")
        elif entry.cell in tried:
            continue
        elif copy is None:
            dropped.append(f"{entry.filename}: the matrix no longer has this cell")
        elif DestinationRef.of(copy) != entry.destination:
            dropped.append(f"{entry.filename}: the matrix sends it elsewhere now")
        elif not intact(entry):
            dropped.append(f"{entry.filename}: the wheel in dist/ is missing or changed")
        else:
            kept.append(entry)
    manifest = Manifest(
        project=project,
        version=version,
        wheels=tuple(kept) + tuple(built),
        source_date_epoch=epoch,
        commit=commit,
    )
    return Reconciled(
        manifest=manifest, kept=tuple(e.filename for e in kept), dropped=tuple(dropped)
    )


def _copy_named(cell: Cell, filename: str) -> Cell | None:
    """The copy of `cell` (as that copy publishes it) whose wheel is `filename`, if any."""
    return next(
        (seen for copy in cell.copies if (seen := cell.as_copy(copy)).wheel_filename == filename),
        None,
    )


def stray_wheels(out: Path, manifest: Manifest) -> list[str]:
    """Wheels in `out` that the manifest does not list (another version, a dropped cell)."""
    listed = {w.filename for w in manifest.wheels}
    return sorted(p.name for p in out.glob("*.whl") if p.name not in listed)
