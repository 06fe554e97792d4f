"""`release build --compare`: is a rebuild byte for byte the wheel an earlier build made?

Pure: `first_difference` names the first zip member that differs between two wheels and
how (missing, size, content hash, date, mode, compression, order), and `compare` gives
the verdict of one cell. The command builds the cells again from empty device and wheel
caches and hands the bytes in.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass

from release.records.manifest import WheelEntry


@dataclass(frozen=True, kw_only=True)
class Comparison:
    cell: str
    filename: str
    identical: bool
    detail: str
    reference_sha256: str | None = None
    rebuilt_sha256: str | None = None


def _members(data: bytes) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.infolist()


def _read(data: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read(name)


def first_difference(reference: bytes, rebuilt: bytes) -> str:
    """The first member of the two wheels that differs, and how; for two readable zips
    whose members all agree, what else differs (the archive's own bytes)."""
    try:
        ours, theirs = _members(reference), _members(rebuilt)
    except (zipfile.BadZipFile, EOFError, ValueError) as error:
        return f"one of the wheels is not a readable zip ({error})"
    by_name = {i.filename: i for i in theirs}
    for index, old in enumerate(ours):
        new = by_name.get(old.filename)
        if new is None:
            return f"{old.filename}: missing from the rebuild"
        old_data, new_data = _read(reference, old.filename), _read(rebuilt, new.filename)
        if len(old_data) != len(new_data):
            return f"{old.filename}: {len(old_data)} bytes, rebuilt {len(new_data)} bytes"
        if old_data != new_data:
            pairs = enumerate(zip(old_data, new_data, strict=True))
            first = next(i for i, (a, b) in pairs if a != b)
            return (
                f"{old.filename}: same size, other content (sha256 "
                f"{hashlib.sha256(old_data).hexdigest()[:12]}... vs "
                f"{hashlib.sha256(new_data).hexdigest()[:12]}..., first differing byte at "
                f"offset {first})"
            )
        if old.date_time != new.date_time:
            return f"{old.filename}: dated {old.date_time}, rebuilt {new.date_time}"
        if old.external_attr != new.external_attr:
            return (
                f"{old.filename}: mode {oct(old.external_attr >> 16)}, rebuilt "
                f"{oct(new.external_attr >> 16)}"
            )
        if old.compress_type != new.compress_type:
            return f"{old.filename}: compression {old.compress_type}, rebuilt {new.compress_type}"
        if index >= len(theirs) or theirs[index].filename != old.filename:
            return f"{old.filename}: at position {index}, elsewhere in the rebuild"
    extra = [i.filename for i in theirs if i.filename not in {o.filename for o in ours}]
    if extra:
        return f"{extra[0]}: only in the rebuild"
    return "every member agrees; the archive bytes differ (compression or zip headers)"


def compare(
    cell: str,
    filename: str,
    reference: WheelEntry | None,
    reference_bytes: bytes | None,
    rebuilt: bytes,
) -> Comparison:
    """The verdict on one rebuilt wheel against the reference manifest's entry (and its
    wheel's bytes, where they are at hand and are the ones the entry records, to name the
    first difference)."""
    digest = hashlib.sha256(rebuilt).hexdigest()
    if reference is None:
        return Comparison(
            cell=cell,
            filename=filename,
            identical=False,
            detail="the reference manifest has no wheel of this name",
            rebuilt_sha256=digest,
        )
    if digest == reference.sha256 and len(rebuilt) == reference.size:
        return Comparison(
            cell=cell,
            filename=filename,
            identical=True,
            detail="same sha256",
            reference_sha256=reference.sha256,
            rebuilt_sha256=digest,
        )
    if reference_bytes is None:
        detail = (
            f"sha256 {reference.sha256[:12]}... vs {digest[:12]}... (the reference wheel is "
            "not beside its manifest, so its members cannot be compared)"
        )
    elif hashlib.sha256(reference_bytes).hexdigest() != reference.sha256:
        detail = (
            f"sha256 {reference.sha256[:12]}... vs {digest[:12]}... (the wheel beside the "
            "manifest is not the one it records, so its members cannot be compared)"
        )
    else:
        detail = first_difference(reference_bytes, rebuilt)
    return Comparison(
        cell=cell,
        filename=filename,
        identical=False,
        detail=detail,
        reference_sha256=reference.sha256,
        rebuilt_sha256=digest,
    )
