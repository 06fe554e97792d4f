"""release.remote.lazywheel's RangeReader: a zip read through ranges of its bytes gives the
member zipfile would read from the whole file, asking for a few ranges at the end of a large
file and never for all of it."""

from __future__ import annotations

import io
import zipfile

from release.remote.lazywheel import BLOCK, RangeReader


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
