"""The METADATA of a wheel on a server, read without downloading the wheel: a zip keeps its
directory at its end, so a few HTTP range requests (the end of the file with the central
directory, then the one member) fetch a MB or two of a wheel of hundreds (torch's), as pip's
lazy wheel does. For an index that announces no PEP 658 metadata file beside its wheels.

A server that does not answer a range request with 206 is said as such before any body is
read, so that no whole wheel is ever downloaded here.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from typing import Protocol

from release.errors import shown
from release.remote import httpclient as http
from release.wheelfile import MAX_HEADERS_FILE
from release.ziparchive import MEMBER_ERRORS, directory_problem

BLOCK = 256 * 1024  # the least a request asks for: the end of a wheel holds its directory
_CONTENT_RANGE = re.compile(r"bytes\s+\d+-\d+/(\d+)")


class LazyWheelError(Exception):
    """The wheel's METADATA cannot be read with range requests (the message says why)."""


class RangeReader(io.RawIOBase):
    """A read-only, seekable file of `size` bytes whose reads are ranges fetched by
    `read_range(first, end)` (end exclusive), at least BLOCK bytes each, kept in memory."""

    def __init__(self, read_range: Callable[[int, int], bytes], size: int) -> None:
        super().__init__()
        self._read_range = read_range
        self._size = size
        self._position = 0
        self._spans: list[tuple[int, bytes]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        end = min(self._position + len(buffer), self._size)
        if end <= self._position:
            return 0
        data = self._bytes(self._position, end)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def _bytes(self, first: int, end: int) -> bytes:
        for start, data in self._spans:
            if start <= first and end <= start + len(data):
                return data[first - start : end - start]
        length = max(end - first, BLOCK)
        start = max(0, min(first, self._size - length))
        data = self._read_range(start, min(self._size, start + length))
        self._spans.append((start, data))
        return data[first - start : end - start]


class RangeGet(Protocol):
    """A GET of `url`'s bytes `byte_range` (first, last), the body kept: the caller's client,
    credentials, retries and deadline (release.remote.httpclient.fetch, which leaves the
    body of a 200 unread)."""

    def __call__(self, url: str, *, keep: bool, byte_range: tuple[int, int]) -> http.Download: ...


def _size_of(get: RangeGet, url: str) -> int:
    """The wheel's size from a one-byte range request; LazyWheelError where the server
    does not take range requests."""
    probe = get(url, keep=True, byte_range=(0, 0))
    if probe.error is not None:
        raise LazyWheelError(f"asking its link {shown(url)} fails ({probe.error})")
    if probe.status != 206:
        raise LazyWheelError(f"its server answers a range request with HTTP {probe.status}")
    match = _CONTENT_RANGE.match(probe.headers.get("content-range", ""))
    if match is None or len(match.group(1)) > 18:  # no wheel is an exabyte
        raise LazyWheelError("its server gives no size in Content-Range")
    return int(match.group(1))


def remote_wheel_metadata(get: RangeGet, url: str) -> bytes:
    """The `.dist-info/METADATA` of the wheel at `url`, read with range requests through
    `get` (the first one asks for one byte: a server that ignores ranges never sends the
    wheel). Raises LazyWheelError."""
    total = _size_of(get, url)

    def read_range(first: int, end: int) -> bytes:
        got = get(url, keep=True, byte_range=(first, end - 1))
        if got.status != 206 or got.body is None or len(got.body) != end - first:
            why = got.error or f"HTTP {got.status}"
            raise LazyWheelError(f"a range request for bytes {first}-{end - 1} failed ({why})")
        return got.body

    try:
        reader = RangeReader(read_range, total)
        refused = directory_problem(io.BufferedReader(reader))  # zipfile reads it whole
        if refused is not None:
            raise LazyWheelError(f"its bytes are {refused}")
        with zipfile.ZipFile(reader) as archive:
            names = [
                n
                for n in archive.namelist()
                if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            if len(names) != 1:
                raise LazyWheelError(f"the wheel has {len(names)} .dist-info/METADATA files")
            if archive.getinfo(names[0]).file_size > MAX_HEADERS_FILE:
                raise LazyWheelError(f"its METADATA is over {MAX_HEADERS_FILE // 2**20} MiB")
            return archive.read(names[0])  # read no further than the size it declares
    except (*MEMBER_ERRORS, zipfile.LargeZipFile, OSError) as error:
        raise LazyWheelError(f"its bytes are not a readable zip ({error})") from None
