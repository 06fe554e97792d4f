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
import struct
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
# A central directory is read whole, and an object made of each entry, before any member is:
# torch's is about 2 MiB (15,000 members), one of 64 MiB could hold 1.4 million entries of
# which the end record claims 3 (1.5 million took 835 MB)
MOST_DIRECTORY_SIZE = 64 * 2**20
_SMALLEST_ENTRY = 46  # a directory entry's fixed part: N bytes hold N // 46 entries at most


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
            refused = directory_problem(stream)
        if refused is not None:
            return refused
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


def directory_problem(stream: BinaryIO) -> str | None:
    """Why a zip's central directory is not read (MAX_MEMBERS, MOST_DIRECTORY_SIZE), or None:
    checked before zipfile reads that directory whole, by its size, and makes an object of
    each entry it holds (an end record claiming 3 members over 1.5 million entries took
    835 MB), whatever count the end record claims."""
    end = _end_record(stream)
    if end is None:
        return None
    at, entries, size = end
    if entries > MAX_MEMBERS:
        return f"a zip archive of {entries} members, more than the {MAX_MEMBERS} a wheel may hold"
    if size > MOST_DIRECTORY_SIZE:
        return (
            f"a zip archive whose central directory is {size} bytes, "
            f"more than the {MOST_DIRECTORY_SIZE // 2**20} MiB a wheel's may be"
        )
    if size > _SMALLEST_ENTRY * MAX_MEMBERS and at >= size:  # room for more entries than that
        stream.seek(at - size)
        if _entries(stream.read(size)) > MAX_MEMBERS:
            return (
                f"a zip archive whose central directory holds more than {MAX_MEMBERS} members "
                f"(its end record says {entries}), more than a wheel may hold"
            )
    return None


def _end_record(stream: BinaryIO) -> tuple[int, int, int] | None:
    """Where a zip's central directory ends (the offset of its end record, ZIP64's where
    the plain record defers to it), the entries the record claims and the directory's size
    in bytes, as zipfile reads them; None where there is no end record."""
    end = stream.seek(0, io.SEEK_END)
    tail_size = min(end, 22 + 0xFFFF + 20 + 56)
    stream.seek(end - tail_size)
    tail = stream.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        return None
    entries = int.from_bytes(tail[at + 10 : at + 12], "little")
    size = int.from_bytes(tail[at + 12 : at + 16], "little")
    # ZIP64's record, where a locator just before the plain one points at it (zipfile
    # takes its numbers then, whatever the plain record says)
    record = at - 20 - 56
    if (
        record >= 0
        and tail[at - 20 : at - 16] == b"PK\x06\x07"
        and tail[record : record + 4] == b"PK\x06\x06"
    ):
        entries = int.from_bytes(tail[record + 32 : record + 40], "little")
        size = int.from_bytes(tail[record + 40 : record + 48], "little")
        at = record
    return end - tail_size + at, entries, size


def _entries(directory: bytes) -> int:
    """How many entries `directory` holds, walked as zipfile walks it, counted no further
    than MAX_MEMBERS + 1 (and no further than its first that is not one: zipfile refuses it)."""
    count = at = 0
    while at + _SMALLEST_ENTRY <= len(directory) and count <= MAX_MEMBERS:
        if directory[at : at + 4] != b"PK\x01\x02":
            break
        name, extra, comment = struct.unpack_from("<HHH", directory, at + 28)
        at += _SMALLEST_ENTRY + name + extra + comment
        count += 1
    return count
