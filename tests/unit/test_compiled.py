"""release.backends.compiled: a shared object's fatbins held to what this build compiled."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from release.backends.compiled import (
    FATBIN_HEADER,
    FATBIN_MAGIC,
    ForeignCode,
    digests,
    fatbins,
    foreign_code_problem,
)


def fatbin(payload: bytes, *, header_size: int = FATBIN_HEADER.size) -> bytes:
    header = FATBIN_HEADER.pack(FATBIN_MAGIC, 1, header_size, len(payload))
    return header + b"\x01" * (header_size - FATBIN_HEADER.size) + payload


def test_a_linked_section_splits_into_the_objects_fatbins_whole() -> None:
    first, second = fatbin(b"cubin-of-a" * 3), fatbin(b"cubin-of-b", header_size=24)
    section = first + b"\0" * 6 + second + b"\0" * 2
    assert fatbins(section) == (first, second)
    assert [hashlib.sha256(p).hexdigest() for p in fatbins(section) or ()] == [
        hashlib.sha256(first).hexdigest(),
        hashlib.sha256(second).hexdigest(),
    ]


def test_a_section_that_is_not_a_run_of_fatbins_is_unreadable() -> None:
    whole = fatbin(b"payload")
    assert fatbins(b"\x50\xed\x55\xbb" + whole[4:]) is None  # wrong magic
    assert fatbins(whole[:-1]) is None  # cut short
    assert fatbins(whole[:10]) is None  # not even a header
    assert fatbins(FATBIN_HEADER.pack(FATBIN_MAGIC, 1, 4, 0)) is None  # header too short
    assert fatbins(b"") == ()


def test_the_problem_names_each_file_and_the_likely_cause() -> None:
    found = [
        ForeignCode(name="pkg/_C.abi3.so", foreign=2, total=3),
        ForeignCode(name="pkg/_D.so", foreign=0, total=0, unreadable=True),
    ]
    none_ran = foreign_code_problem(found, recorded=0)
    assert none_ran is not None
    assert none_ran.startswith("no CUDA compile of this build wrote device code")
    assert "pkg/_C.abi3.so (2 of 3 fatbins)" in none_ran
    assert "pkg/_D.so (its device code cannot be read as fatbins)" in none_ran
    assert "_FORCE_BUILD=TRUE" in none_ran
    assert "build.env" in none_ran
    some_ran = foreign_code_problem(found[:1], recorded=5)
    assert some_ran is not None
    assert some_ran.startswith("the wheel holds device code that no compile of this build wrote")
    assert foreign_code_problem([], recorded=0) is None


ELF = Path("/bin/true").read_bytes()  # any ELF file: the reader must not fail on a damaged one


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(ELF) - 1), st.integers(0, 255)), max_size=60))
def test_a_damaged_shared_object_is_read_or_refused_never_a_crash(
    changes: list[tuple[int, int]],
) -> None:
    data = bytearray(ELF)
    for offset, value in changes:
        data[offset] = value
    found = digests(bytes(data))  # an exception here is the failure
    assert found is None or all(len(digest) == 64 for digest in found)


@given(st.binary(max_size=200))
def test_any_section_bytes_split_or_are_refused(section: bytes) -> None:
    parts = fatbins(section)
    if parts is not None:  # whole fatbins, in order, each one inside the section
        assert all(part[:4] == FATBIN_HEADER.pack(FATBIN_MAGIC, 0, 0, 0)[:4] for part in parts)
        assert sum(len(part) for part in parts) <= len(section)
