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
    Piece,
    fatbins,
    foreign_code_problem,
    foreign_device_code,
    may_hold_device_code,
    pieces,
    step_record,
)

ELF_DEVICE = Path(__file__).resolve().parents[1] / "data" / "elf-device"


def held(name: str, *, shared: bool = True) -> tuple[Piece, ...]:
    found = pieces((ELF_DEVICE / name).read_bytes(), shared=shared)
    assert found is not None
    return found


def built_with_rdc() -> frozenset[str]:
    """What the wrapper records of a build that compiles rdc-a.cu and rdc-b.cu with -rdc
    and device-links their objects (tests/data/elf-device/README)."""
    compiled = [step_record(held(name), [], frozenset()).made for name in ("rdc-a.o", "rdc-b.o")]
    recorded = frozenset(digest for made in compiled for digest in made)
    linked = step_record(
        held("rdc-dlink.o"),
        [held("rdc-a.o", shared=False), held("rdc-b.o", shared=False)],
        recorded,
    )
    assert len(linked.made) == 1  # the device link made one fatbin of its own
    return recorded | set(linked.made)


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


def test_the_problem_names_each_file_where_its_code_lies_whence_it_came_and_both_causes() -> None:
    prebuilt, dlink = Piece(".nv_fatbin", "7e" * 32), Piece(".nv_fatbin", "f9" * 32)
    found = [
        ForeignCode(name="pkg/_C.abi3.so", foreign=(prebuilt, dlink), total=3),
        ForeignCode(name="pkg/_D.so", unreadable=True),
    ]
    origins = {prebuilt.digest: "third_party/pre.o, an input of the nvcc step that wrote x.so"}
    none_ran = foreign_code_problem(found, recorded=0, origins=origins)
    assert none_ran is not None
    assert none_ran.startswith("no CUDA compile of this build wrote device code")
    assert (
        "pkg/_C.abi3.so (2 of 3 fatbins: .nv_fatbin 7e7e7e7e7e7e, from third_party/pre.o, an "
        "input of the nvcc step that wrote x.so; .nv_fatbin f9f9f9f9f9f9, no compile here "
        "made it)"
    ) in none_ran
    assert "pkg/_D.so (its device code cannot be read as fatbins)" in none_ran
    # both likely causes, each with its remedy
    assert "downloads a prebuilt wheel" in none_ran
    assert "_FORCE_BUILD=TRUE" in none_ran
    assert "build.env" in none_ran
    assert "a binary that the sources carry" in none_ran
    assert "build it from its sources in the project's build, or drop it" in none_ran
    some_ran = foreign_code_problem(found[:1], recorded=5)
    assert some_ran is not None
    assert some_ran.startswith("the wheel holds device code that no compile of this build wrote")
    assert foreign_code_problem([], recorded=0) is None


def test_a_prebuilt_object_linked_beside_relocatable_device_code_is_foreign() -> None:
    # F16: rdc-prebuilt.so links prebuilt.o (no compile of this build wrote it) beside the
    # -rdc objects: its .nv_fatbin holds the device link's fatbin and prebuilt.o's, its
    # __nv_relfatbin the -rdc objects' fatbins
    recorded = built_with_rdc()
    (prebuilt,) = held("prebuilt.o")
    members = [
        ("pkg/_C.so", (ELF_DEVICE / "rdc.so").read_bytes()),
        ("pkg/_D.so", (ELF_DEVICE / "rdc-prebuilt.so").read_bytes()),
    ]
    assert foreign_device_code(members, recorded) == (
        ForeignCode(name="pkg/_D.so", foreign=(prebuilt,), total=4),
    )
    assert prebuilt.place == ".nv_fatbin"
    # every section read: the -rdc objects' fatbins and the device link's too
    assert {p.place for p in held("rdc.so")} == {".nv_fatbin", "__nv_relfatbin"}
    assert {p.digest for p in held("rdc.so")} == recorded


def test_fatbin_and_cubin_files_are_device_code_whatever_their_name() -> None:
    # F17: a prebuilt .fatbin or .cubin shipped as package data
    fatbin, cubin = (
        (ELF_DEVICE / "prebuilt.fatbin").read_bytes(),
        (ELF_DEVICE / "prebuilt.cubin").read_bytes(),
    )
    members = [("pkg/k.fatbin", fatbin), ("pkg/k.cubin", cubin), ("pkg/blob.bin", cubin)]
    found = foreign_device_code(members, built_with_rdc())
    assert [(item.name, [p.place for p in item.foreign]) for item in found] == [
        ("pkg/k.fatbin", ["fatbin file"]),
        ("pkg/k.cubin", ["cubin"]),
        ("pkg/blob.bin", ["cubin"]),
    ]
    # the same fatbin in an object: a fatbin file's pieces are its fatbins
    assert held("prebuilt.fatbin")[0].digest == held("prebuilt.o")[0].digest
    # one that a compile of this build wrote passes
    made = step_record(held("prebuilt.fatbin"), [], frozenset()).made
    assert foreign_device_code(members[:1], frozenset(made)) == ()
    assert all(may_hold_device_code(data[:8]) for _, data in members)
    assert not may_hold_device_code(b"import o")


def test_a_static_librarys_members_are_read() -> None:
    (piece,) = held("libprebuilt.a")
    assert piece == Piece("prebuilt.o: .nv_fatbin", held("prebuilt.o")[0].digest)


def test_a_shared_object_as_a_links_input_gives_it_no_device_code() -> None:
    assert held("rdc.so", shared=False) == ()
    assert held("rdc.so") != ()


def test_a_step_records_what_it_made_only_from_recorded_inputs() -> None:
    a, b = held("rdc-a.o", shared=False), held("rdc-b.o", shared=False)
    prebuilt = held("prebuilt.o", shared=False)
    recorded = frozenset(p.digest for p in (*a, *b))
    # a device link of recorded objects: its own fatbin is made here
    dlink = step_record(held("rdc-dlink.o"), [a, b], recorded)
    assert dlink.made == (held("rdc-dlink.o")[0].digest,)
    assert dlink.foreign == ()
    # F18: a link with a prebuilt object makes nothing, and names the foreign input's code
    linked = step_record(held("rdc-prebuilt.so"), [a, b, prebuilt], recorded)
    assert linked.made == ()
    assert linked.foreign == (prebuilt[0].digest,)
    # a link copies its inputs' fatbins: nothing of its own
    assert (
        step_record(held("rdc.so"), [a, b, held("rdc-dlink.o")], recorded | set(dlink.made)).made
        == ()
    )


ELF = Path("/bin/true").read_bytes()  # any ELF file: the reader must not fail on a damaged one


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, len(ELF) - 1), st.integers(0, 255)), max_size=60))
def test_a_damaged_shared_object_is_read_or_refused_never_a_crash(
    changes: list[tuple[int, int]],
) -> None:
    data = bytearray(ELF)
    for offset, value in changes:
        data[offset] = value
    found = pieces(bytes(data))  # an exception here is the failure
    assert found is None or all(len(piece.digest) == 64 for piece in found)


@given(st.binary(max_size=200))
def test_any_section_bytes_split_or_are_refused(section: bytes) -> None:
    parts = fatbins(section)
    if parts is not None:  # whole fatbins, in order, each one inside the section
        assert all(part[:4] == FATBIN_HEADER.pack(FATBIN_MAGIC, 0, 0, 0)[:4] for part in parts)
        assert sum(len(part) for part in parts) <= len(section)
