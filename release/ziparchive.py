"""A zip archive from outside (a wheel a server gave, a file of dist/) as it is read
before anything inside it is trusted: whether it is one at all, whether every member reads
back whole, and the bounds past which a member or the archive is refused unread (members,
a member's inflated size, its inflation: a zip bomb is damage, not a wheel). Pure: bytes or a
path in, a reason or None out.
"""

from __future__ import annotations

import io
import lzma
import re
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from release.errors import shown

# torch's wheels hold about 15,000 members: a zip of a million entries is damage
MAX_MEMBERS = 200_000
# A member is read (CRC-checked, copied to scratch as a shared object) no larger than this
# (the largest of CUDA's own libraries, libcublasLt.so.13, is 517 MiB), nor one over 64 MiB
# that inflates more than MOST_INFLATION times its stored size (real libraries, fatbins
# included, 2 to 10 times): a member declaring more is a zip bomb that would take minutes
# and fill the disk, not a file of a wheel.
MOST_MEMBER_SIZE = 4 * 2**30
MOST_INFLATION = 500
# The same of the whole archive: members each under the bound, many of them (200 of 60 MiB
# in a 12 MB wheel) took minutes to read back. torch's wheel inflates to about 2 GiB, 3 to
# 5 times its size.
MOST_ARCHIVE_SIZE = 16 * 2**30


# What reading members of a zip raises on damaged bytes: a CRC that does not match, a deflate
# stream that does not inflate, a member cut short, a method or encryption zipfile cannot read,
# an LZMA member whose properties do not decode (a bzip2 one raises OSError).
MEMBER_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)


def inflation_problem(info: zipfile.ZipInfo) -> str | None:
    """Why the member `info` is not read (MOST_MEMBER_SIZE, MOST_INFLATION), or None."""
    if info.file_size > MOST_MEMBER_SIZE:
        return f"inflates to {info.file_size} bytes, more than a wheel's file may"
    stored = max(info.compress_size, 1)
    if info.file_size > 64 * 2**20 and info.file_size > MOST_INFLATION * stored:
        return f"inflates {info.file_size // stored} times its stored size (a zip bomb)"
    return None


_DRIVE = re.compile(r"[A-Za-z]:")  # C:/Windows/x.py: outside the archive where it unpacks


def zip_problem(source: Path | bytes) -> str | None:
    """Why `source` (a file, or its bytes) is not a zip archive whose every member reads
    back whole, or None: `not a zip archive`, or `a damaged zip archive (why)`."""
    try:
        with io.BytesIO(source) if isinstance(source, bytes) else source.open("rb") as stream:
            members = _member_count(stream)
        if members is not None and members > MAX_MEMBERS:
            return (
                f"a zip archive of {members} members, more than the {MAX_MEMBERS} a wheel may hold"
            )
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (*MEMBER_ERRORS, OSError):  # NotImplementedError: "zip file version 10.0"
        return "not a zip archive"
    with archive:
        for info in archive.infolist():
            refused = inflation_problem(info)
            if refused is not None:
                return f"a zip archive whose member {shown(info.filename)} {refused}"
        inflated = sum(info.file_size for info in archive.infolist())
        stored = max(sum(info.compress_size for info in archive.infolist()), 1)
        if inflated > MOST_ARCHIVE_SIZE or (
            inflated > 256 * 2**20 and inflated > MOST_INFLATION * stored
        ):
            return (
                f"a zip archive whose members inflate to {inflated} bytes, "
                f"{inflated // stored} times their stored size (a zip bomb)"
            )
        try:
            bad = archive.testzip()
        except (*MEMBER_ERRORS, OSError) as error:
            return f"a damaged zip archive ({error})"
        names: set[str] = set()
        for info in archive.infolist():
            if not info.filename:
                return "a zip archive with a member of no name"
            parts = info.filename.split("/")
            if (
                info.filename.startswith("/")
                or ".." in parts
                or "\\" in info.filename
                or _DRIVE.match(info.filename)
            ):
                return f"a zip archive whose member {shown(info.filename)} lies outside it"
            other = _unicode_path(info.extra)
            if other is not None and other != info.filename:
                return (
                    f"a zip archive whose member {shown(info.filename)} is named "
                    f"{shown(other)} in its Unicode Path field (unzip writes that name)"
                )
            if info.filename in names:  # which of them a reader takes is the reader's choice
                return f"a zip archive that holds {shown(info.filename)} twice"
            names.add(info.filename)
    return None if bad is None else f"a damaged zip archive ({bad} does not read back)"


def _unicode_path(extra: bytes) -> str | None:
    """The name an Info-ZIP Unicode Path extra field (0x7075) gives a member, which Python's
    zipfile ignores and unzip and 7-Zip write instead; None without one."""
    at = 0
    while at + 4 <= len(extra):
        kind, size = (
            int.from_bytes(extra[at : at + 2], "little"),
            int.from_bytes(extra[at + 2 : at + 4], "little"),
        )
        if kind == 0x7075 and size >= 5:
            return extra[at + 9 : at + 4 + size].decode("utf-8", errors="replace")
        at += 4 + size
    return None


def _member_count(stream: BinaryIO) -> int | None:
    """The entries a zip's end record says its central directory holds (ZIP64's where the
    plain record defers to it), read before zipfile reads that directory whole; None where
    there is no end record."""
    end = stream.seek(0, io.SEEK_END)
    tail_size = min(end, 22 + 0xFFFF + 20 + 56)
    stream.seek(end - tail_size)
    tail = stream.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 12 > len(tail):
        return None
    entries = int.from_bytes(tail[at + 10 : at + 12], "little")
    if entries == 0xFFFF:
        record = tail.rfind(b"PK\x06\x06", 0, at)
        if record >= 0 and record + 40 <= at:
            entries = int.from_bytes(tail[record + 32 : record + 40], "little")
    return entries
