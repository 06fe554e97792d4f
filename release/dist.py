"""The release artifact: the manifest(s) in a dist directory and the wheels beside them.

Plan, publish and verify start here: `load_dist` reads the manifest (or the manifests of
several build jobs, merged) and checks every entry against its wheel before anything else
happens: the filename's project and version against the manifest's, the wheel's METADATA
against its filename, and size and sha256 against what the build recorded. A dist that
fails is refused as a whole, with every problem named.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from release.errors import ConfigError
from release.fsutil import sha256_file
from release.manifest import MANIFEST_NAME, Manifest, WheelEntry, read_manifests
from release.wheelfile import WheelFacts, read_wheel


def manifest_paths(dist: Path) -> list[Path]:
    """`<dist>/manifest.json`, else every `<dist>/manifest*.json` (one per build job, the
    wheels of all jobs downloaded into the same directory), merged by `read_manifests`."""
    top = dist / MANIFEST_NAME
    if top.is_file():
        return [top]
    found = sorted(dist.glob("manifest*.json"))
    if not found:
        raise ConfigError(
            [f"{top}: no such file"], hint="run `release build` first, or pass --dist DIR"
        )
    return found


def entry_problems(manifest: Manifest, entry: WheelEntry, facts: WheelFacts | None) -> list[str]:
    """Why `entry` does not describe its wheel (`facts`, None when the file is missing).
    Pure: the digest is checked by the caller."""
    name = entry.filename
    try:
        project, version, _, _ = parse_wheel_filename(name)
    except InvalidWheelFilename as error:
        return [f"{name}: not a wheel filename ({error})"]
    problems = []
    if project != canonicalize_name(manifest.project):
        problems.append(f"{name}: the manifest is for {manifest.project}")
    try:
        public = Version(manifest.version)
    except InvalidVersion:
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
    if facts.metadata_name is None or canonicalize_name(facts.metadata_name) != project:
        problems.append(f"{name}: METADATA Name is {facts.metadata_name!r}")
    if facts.metadata_version is None or _version(facts.metadata_version) != version:
        problems.append(f"{name}: METADATA Version is {facts.metadata_version!r}")
    return problems


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
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
            digest = sha256_file(wheel)
            if digest != entry.sha256:
                found.append(
                    f"{entry.filename} has sha256 {digest[:12]}..., the manifest says "
                    f"{entry.sha256[:12]}..."
                )
        problems += found
    return problems


def load_dist(dist: Path, *, missing_ok: bool = False) -> Manifest:
    """The manifest of `dist`, checked against its wheels; ConfigError naming every
    problem when they disagree."""
    manifest = read_manifests(manifest_paths(dist))
    problems = dist_problems(manifest, dist, manifest.wheels, missing_ok=missing_ok)
    if problems:
        raise ConfigError(
            [f"{dist}: {p}" for p in problems],
            hint="the wheels are not the ones this manifest records: rebuild with "
            "`release build`, or restore the dist directory",
        )
    return manifest
