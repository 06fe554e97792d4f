"""What is published beside the wheels: a wheel's PEP 658 `.metadata` and PEP 740
`.provenance`, the release's NCCL files and its release-manifest.json. Their bytes are known
before publishing; each is decided like a wheel (release.destinations.decide).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from release.destinations.decide import Companion
from release.errors import ConfigError
from release.provenance.attestation import PROVENANCE_SUFFIX, attestation_path, github_provenance
from release.records.manifest import Manifest, WheelEntry
from release.records.release_manifest import RELEASE_MANIFEST, release_manifest_bytes
from release.wheelfile import read_wheel


def sidecar(entry: WheelEntry, dist: Path) -> Companion:
    """The PEP 658 `<wheel>.metadata`: the wheel's METADATA, byte for byte."""
    facts = read_wheel(dist / entry.filename)
    if facts.metadata is None:
        raise ConfigError(
            [f"{dist / entry.filename}: no METADATA to publish as {entry.filename}.metadata"],
            hint="rebuild with `release build`",
        )
    return companion(f"{entry.filename}.metadata", facts.metadata, entry.filename, "PEP 658")


def wheel_companions(entry: WheelEntry, dist: Path) -> list[Companion]:
    """What a GitHub release holds beside a wheel: its `.metadata`, its `.provenance`."""
    return [sidecar(entry, dist), *provenance_sidecar(entry, dist)]


def provenance_sidecar(entry: WheelEntry, dist: Path) -> list[Companion]:
    """The PEP 740 `<wheel>.provenance` of a wheel signed in the publish job (none for a
    wheel without a readable attestation: the plan refuses one that does not match)."""
    data = github_provenance(dist / entry.filename)
    if data is None:
        return []
    name = entry.filename + PROVENANCE_SUFFIX
    return [companion(name, data, entry.filename, "PEP 740 provenance")]


def release_files(manifest: Manifest, dist: Path) -> list[Companion]:
    """The NCCL files of the build and a manifest of every built file's sha256 (what
    `release verify --tag` checks against when no dist is at hand)."""
    out = []
    for name in manifest.nccl_files:
        path = dist / name
        try:
            data = path.read_bytes()
        except OSError as error:
            raise ConfigError(
                [f"{path}: {error.strerror} (the manifest lists it)"],
                hint="rebuild with `release build`",
            ) from None
        out.append(companion(name, data, "release", "NCCL pin"))
    attested = [
        w.filename for w in manifest.wheels if attestation_path(dist / w.filename).is_file()
    ]
    data = release_manifest_bytes(manifest, attested)
    out.append(replace(companion(RELEASE_MANIFEST, data, "release", "manifest"), record=True))
    return out


def companion(name: str, data: bytes, of: str, purpose: str) -> Companion:
    sha256 = hashlib.sha256(data).hexdigest()
    return Companion(filename=name, data=data, sha256=sha256, of=of, purpose=purpose)
