"""release.remote.lazywheel's RangeReader: a zip read through ranges of its bytes gives the
member zipfile would read from the whole file, asking for a few ranges at the end of a large
file and never for all of it."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from release.remote.httpclient import Download
from release.remote.lazywheel import (
    BLOCK,
    LazyWheelError,
    RangeGet,
    RangeReader,
    remote_wheel_metadata,
)


def big_wheel() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("torch/lib/libtorch_bulk.so", bytes(range(256)) * 40_000)  # 10 MB
        archive.writestr("torch-2.11.0.dist-info/METADATA", "Name: torch\nVersion: 2.11.0\n")
    return buffer.getvalue()


def test_the_metadata_comes_from_a_few_ranges_at_the_end() -> None:
    data = big_wheel()
    asked: list[tuple[int, int]] = []

    def read_range(first: int, end: int) -> bytes:
        asked.append((first, end))
        return data[first:end]

    with zipfile.ZipFile(RangeReader(read_range, len(data))) as archive:
        metadata = archive.read("torch-2.11.0.dist-info/METADATA")
    assert metadata == b"Name: torch\nVersion: 2.11.0\n"
    assert len(asked) <= 3
    assert sum(end - first for first, end in asked) <= 3 * BLOCK < len(data) / 10
    assert all(end <= len(data) for _, end in asked)


def test_a_small_file_is_one_range() -> None:
    data = b"0123456789"
    asked: list[tuple[int, int]] = []

    def read_range(first: int, end: int) -> bytes:
        asked.append((first, end))
        return data[first:end]

    reader = RangeReader(read_range, len(data))
    reader.seek(-4, io.SEEK_END)
    assert reader.read(10) == b"6789"
    reader.seek(2)
    assert reader.read(3) == b"234"
    assert reader.read(0) == b""
    assert asked == [(0, 10)]


def served_by_ranges(data: bytes, *, total: str | None = None) -> RangeGet:
    """A RangeGet answering from `data` as a server that takes range requests does
    (`total`: the size its Content-Range says instead of the real one)."""

    def get(url: str, *, keep: bool, byte_range: tuple[int, int]) -> Download:
        first, last = byte_range
        size = total if total is not None else str(len(data))
        return Download(
            status=206,
            body=data[first : last + 1],
            headers={"content-range": f"bytes {first}-{last}/{size}"},
        )

    return get


def test_a_metadata_past_its_bound_is_not_read() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("torch-2.11.0.dist-info/METADATA", b"Name: torch\n" + bytes(9 * 2**20))
    get = served_by_ranges(buffer.getvalue())
    with pytest.raises(LazyWheelError, match=r"^its METADATA is over 8 MiB$"):
        remote_wheel_metadata(get, "http://files.test/torch.whl")


@pytest.mark.parametrize("total", ["9" * 5000, "9" * 19])
def test_a_size_no_wheel_has_is_no_size(total: str) -> None:
    get = served_by_ranges(big_wheel(), total=total)
    with pytest.raises(LazyWheelError, match=r"no size in Content-Range"):
        remote_wheel_metadata(get, "http://files.test/torch.whl")


def test_a_zip_asking_a_newer_zip_version_is_not_readable() -> None:
    data = bytearray(big_wheel())
    central = data.find(b"PK\x01\x02")
    while central >= 0:
        data[central + 6 : central + 8] = (100).to_bytes(2, "little")  # version needed: 10.0
        central = data.find(b"PK\x01\x02", central + 1)
    with pytest.raises(LazyWheelError, match=r"not a readable zip"):
        remote_wheel_metadata(served_by_ranges(bytes(data)), "http://files.test/torch.whl")


def test_a_link_that_cannot_be_asked_is_named_in_a_sentence() -> None:
    """A `javascript:` link on an index page read "its server not a URL that can be
    asked: ..."."""

    def get(url: str, *, keep: bool, byte_range: tuple[int, int]) -> Download:
        return Download(status=None, error="not a URL that can be asked: no scheme")

    with pytest.raises(LazyWheelError) as caught:
        remote_wheel_metadata(get, "javascript:alert(1)")
    assert str(caught.value) == (
        "asking its link 'javascript:alert(1)' fails (not a URL that can be asked: no scheme)"
    )


def test_a_central_directory_past_a_wheels_is_not_read_through_ranges() -> None:
    """A torch index's wheel whose end record claims 3 members over a directory of 200,001
    entries: zipfile read the directory whole by its size, as it did from a file (835 MB
    for 1.5 million entries)."""
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, *[0] * 6)
    directory = b"".join(entry + bytes([97 + n % 26]) for n in range(200_001))
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 3, 3, len(directory), 0, 0)
    get = served_by_ranges(directory + end)
    with pytest.raises(LazyWheelError, match=r"^its bytes are a zip archive whose central"):
        remote_wheel_metadata(get, "http://files.test/torch.whl")
