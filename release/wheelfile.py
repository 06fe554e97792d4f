"""What a wheel says about itself: its .dist-info, METADATA (read with `packaging`) and WHEEL.

One reader for every stage that looks inside a wheel: the inspection after a build, the
dist/ check before plan, publish and verify, PyPI's refusal rules, and the PEP 658
`.metadata` sidecar. `wheel_facts` works on bytes; `read_wheel` on a file; `record_hash` is
the hash of a member as RECORD writes it.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.metadata import ExceptionGroup as MetadataErrors
from packaging.metadata import InvalidMetadata, Metadata


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What a wheel's .dist-info holds."""

    size: int
    unreadable: str | None = None  # why the file could not be read as a wheel
    dist_info: str | None = None
    metadata_name: str | None = None
    metadata_version: str | None = None
    has_metadata: bool = False
    has_record: bool = False
    has_wheel_file: bool = False
    metadata_problems: tuple[str, ...] = ()
    requires_python: str | None = None
    metadata: bytes | None = None  # the METADATA file's bytes (the PEP 658 sidecar)
    wheel_tags: tuple[str, ...] = ()  # the WHEEL file's `Tag:` lines
    root_is_purelib: str | None = None


def record_hash(data: bytes) -> str:
    """A member's hash as a wheel's RECORD holds it: `sha256=` and the digest in urlsafe
    base64 without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def wheel_facts(data: bytes) -> WheelFacts:
    """Read the .dist-info of a wheel given as bytes."""
    return _read(io.BytesIO(data), len(data))


def read_wheel(path: Path) -> WheelFacts:
    """`wheel_facts` of the file at `path` (read in place); a file that cannot be read is
    `unreadable`."""
    try:
        size = path.stat().st_size
    except OSError as error:
        return WheelFacts(size=0, unreadable=f"cannot read {path.name}: {error.strerror}")
    return _read(path, size)


def _read(source: Path | io.BytesIO, size: int) -> WheelFacts:
    try:
        with zipfile.ZipFile(source) as archive:
            names = archive.namelist()
            tops = {n.split("/", 1)[0] for n in names}
            dist_infos = sorted(top for top in tops if top.endswith(".dist-info"))
            if len(dist_infos) != 1:
                return WheelFacts(
                    size=size, unreadable=f"has {len(dist_infos)} .dist-info directories, not 1"
                )
            dist_info = dist_infos[0]
            present = set(names)
            metadata = _member(archive, present, f"{dist_info}/METADATA")
            wheel = _member(archive, present, f"{dist_info}/WHEEL")
            has_record = f"{dist_info}/RECORD" in present
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        return WheelFacts(size=size, unreadable=f"not a readable zip file ({error})")
    wheel_headers = email.parser.BytesParser().parsebytes(wheel or b"", headersonly=True)
    facts = {
        "size": size,
        "dist_info": dist_info,
        "has_record": has_record,
        "has_wheel_file": wheel is not None,
        "wheel_tags": tuple(t.strip() for t in wheel_headers.get_all("Tag") or []),
        "root_is_purelib": wheel_headers.get("Root-Is-Purelib"),
    }
    if metadata is None:
        return WheelFacts(**facts)  # type: ignore[arg-type]
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    problems: list[str] = []
    try:
        Metadata.from_email(metadata, validate=True)
    except InvalidMetadata as error:
        problems.append(str(error))
    except MetadataErrors as group:
        problems.extend(str(e) for e in group.exceptions)
    return WheelFacts(
        **facts,  # type: ignore[arg-type]
        has_metadata=True,
        metadata=metadata,
        metadata_name=headers.get("Name"),
        metadata_version=headers.get("Version"),
        metadata_problems=tuple(problems),
        requires_python=headers.get("Requires-Python"),
    )


def _member(archive: zipfile.ZipFile, present: set[str], name: str) -> bytes | None:
    return archive.read(name) if name in present else None
