"""`release-manifest.json`: the sha256 of every built file, published as a release asset
by `release publish` and read back by `release verify --tag` when no dist/ is at hand.

What was built, reduced to what a later check needs: per wheel its filename, sha256, size,
destination (name and kind), arch and local label, and `"attested": true` for a wheel whose
PEP 740 attestation was published with it (signed in the publish job, which attests every
file it ships: release verify then requires provenance without being asked). The same wheels
give the same bytes, whoever builds them (keys sorted, wheels by filename).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from release.fsutil import json_document, json_text
from release.records.manifest import Manifest, WheelEntry

RELEASE_MANIFEST = "release-manifest.json"
RELEASE_MANIFEST_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class ReleaseWheel:
    """One wheel as `release-manifest.json` records it (its fields are the file's keys)."""

    filename: str
    sha256: str
    size: int
    kind: str
    destination: str
    arch: str
    local_label: str | None
    attested: bool = False  # published with its PEP 740 attestation, in the signing job

    @classmethod
    def of(cls, entry: WheelEntry, *, attested: bool = False) -> ReleaseWheel:
        return cls(
            attested=attested,
            filename=entry.filename,
            sha256=entry.sha256,
            size=entry.size,
            kind=entry.destination.kind,
            destination=entry.destination.name,
            arch=entry.arch,
            local_label=entry.local_label,
        )


def release_manifest_bytes(manifest: Manifest, attested: Collection[str] = ()) -> bytes:
    """The `release-manifest.json` of the wheels of `manifest`; `attested` names those
    published with their PEP 740 attestation."""
    document = {
        "schema": RELEASE_MANIFEST_SCHEMA,
        "project": manifest.project,
        "version": manifest.version,
        "wheels": [
            _wheel_json(ReleaseWheel.of(w, attested=w.filename in attested))
            for w in sorted(manifest.wheels, key=lambda w: w.filename)
        ],
    }
    return json_text(document, sort_keys=True).encode()


def _wheel_json(wheel: ReleaseWheel) -> dict[str, Any]:
    """One wheel's keys; `attested` only where true, so that an unattested release's file
    keeps the bytes it had before the key existed."""
    fields = asdict(wheel)
    if not wheel.attested:
        del fields["attested"]
    return fields


def parse_release_manifest(data: bytes) -> list[ReleaseWheel]:
    """The wheels of a `release-manifest.json`; ValueError when it is not one (a missing
    key is a KeyError, a size that is not a number the error of `int`)."""
    document = json_document(data, RELEASE_MANIFEST)
    if not isinstance(document, dict) or not isinstance(document.get("wheels"), list):
        raise ValueError("not a release manifest")
    out = []
    for raw in document["wheels"]:
        if not isinstance(raw, dict):
            raise ValueError("a wheel is not an object")
        label = raw.get("local_label")
        out.append(
            ReleaseWheel(
                filename=str(raw["filename"]),
                sha256=str(raw["sha256"]),
                size=int(raw["size"]),
                kind=str(raw["kind"]),
                destination=str(raw["destination"]),
                arch=str(raw.get("arch", "")),
                local_label=label if isinstance(label, str) else None,
                attested=raw.get("attested") is True,
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class PreviousRelease:
    """A release before this one, as its release-manifest.json says it was built."""

    version: str
    source: str  # where its release-manifest.json came from
    wheels: tuple[ReleaseWheel, ...]


def previous_release(data: bytes, *, source: str) -> PreviousRelease:
    """The release a `release-manifest.json` records; ValueError (KeyError, TypeError) when
    it is not one."""
    return PreviousRelease(
        version=release_manifest_version(data),
        source=source,
        wheels=tuple(parse_release_manifest(data)),
    )


def release_manifest_version(data: bytes) -> str:
    """The version a `release-manifest.json` records; ValueError when it records none."""
    document = json_document(data, RELEASE_MANIFEST)
    version = document.get("version") if isinstance(document, dict) else None
    if not isinstance(version, str):
        raise ValueError("it records no version")
    return version
