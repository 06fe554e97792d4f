"""What this build's CUDA compiles wrote, and whether a wheel's device code is theirs.

Device code lies in a file as pieces: each fatbin of an ELF file's `.nv_fatbin` and
`__nv_relfatbin` sections (an object, a shared object, each member of a static library),
each fatbin of a fatbin file, and a cubin file whole. The compile wrapper
(release.toolchain.nvccwrap) records the sha256 of every piece that a compile step of
this build made: one empty file named by the digest in the cell's records directory
(RELEASE_COMPILE_RECORDS), so parallel compiles never write one file with two contents.
A link copies each object's fatbins whole, one after another with zero padding between,
so every piece of what this build linked is one that a step of this build made.
`foreign_device_code` holds every member of a built wheel to that: device code that no
step of this build made came from elsewhere, a prebuilt wheel that a setup.py downloaded
instead of building, or a binary that the sources carry.

A step is held to its inputs: the pieces its output holds that none of its inputs holds
are what it made (a compile's fatbins, a device link's), recorded only where every piece
of its inputs is recorded already; a link of a prebuilt object makes nothing of its own.
Where an input's piece is not recorded, the wrapper notes which file brought it
(`ORIGINS`), and the failure says so.

Pure: `fatbins`, `pieces`, `step_record`, `foreign_device_code`, `foreign_code_problem`.
Edge: `recorded_digests` and `recorded_origins` read the records directory.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import arpy  # type: ignore[import-untyped]
from elftools.elf.elffile import ELFFile

from release.elfread import ELF_READ_ERRORS

# fatBinaryHeader of CUDA's fatbinary.h: magic, version, header size, size after the header
FATBIN_HEADER = struct.Struct("<IHHQ")
FATBIN_MAGIC = 0xBA55ED50
LINKED_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"
DEVICE_SECTIONS = (LINKED_SECTION, RELOCATABLE_SECTION)
FATBIN_FILE = "fatbin file"
CUBIN_FILE = "cubin"
ELF_MAGIC = b"\x7fELF"
ARCHIVE_MAGIC = b"!<arch>\n"
# the records directory's subdirectory where the wrapper notes, per digest, which input of
# a step brought a piece that no step of this build made
ORIGINS = "origins"
SHORT = 12  # hex digits of a digest in a message

DOWNLOAD_CAUSE = (
    "(1) a setup.py that downloads a prebuilt wheel instead of building (flash-attention's "
    "family does unless <NAME>_FORCE_BUILD=TRUE): set that variable in matrix.yaml's "
    "build.env"
)
CARRIED_CAUSE = (
    "(2) a binary that the sources carry (a prebuilt object, static library, shared "
    "object, .fatbin or .cubin) linked or shipped as it is: build it from its sources in "
    "the project's build, or drop it"
)


@dataclass(frozen=True)
class Piece:
    """One piece of device code: where it lies in its file (a section's name, `fatbin
    file`, `cubin`; `member.o: .nv_fatbin` in a static library) and its sha256."""

    place: str
    digest: str


def fatbins(section: bytes) -> tuple[bytes, ...] | None:
    """The fatbins of a device-code section, in order; None where the section is not a run
    of whole fatbins with zero padding between."""
    found: list[bytes] = []
    offset = 0
    while offset < len(section):
        if section[offset] == 0:
            offset += 1
            continue
        if offset + FATBIN_HEADER.size > len(section):
            return None
        magic, _version, header_size, size = FATBIN_HEADER.unpack_from(section, offset)
        end = offset + header_size + size
        if magic != FATBIN_MAGIC or header_size < FATBIN_HEADER.size or end > len(section):
            return None
        found.append(section[offset:end])
        offset = end
    return tuple(found)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fatbin_pieces(data: bytes, place: str) -> tuple[Piece, ...] | None:
    parts = fatbins(data)
    return None if parts is None else tuple(Piece(place, _sha(part)) for part in parts)


def _elf_pieces(data: bytes, *, shared: bool) -> tuple[Piece, ...] | None:
    try:
        elf = ELFFile(io.BytesIO(data))
        if elf["e_machine"] == "EM_CUDA":
            return (Piece(CUBIN_FILE, _sha(data)),)
        if not shared and elf["e_type"] == "ET_DYN":
            return ()  # a linked library keeps its device code: none is copied from it
        sections = [
            (section.name, section.data())
            for section in elf.iter_sections()
            if section.name in DEVICE_SECTIONS
        ]
    except ELF_READ_ERRORS:
        return ()  # pyelftools on a damaged file: no section it can read
    found: list[Piece] = []
    for name, section in sections:
        parts = _fatbin_pieces(section, name)
        if parts is None:
            return None
        found.extend(parts)
    return tuple(found)


def _archive_pieces(data: bytes) -> tuple[Piece, ...] | None:
    found: list[Piece] = []
    try:
        with arpy.Archive(fileobj=io.BytesIO(data)) as archive:
            members = [(header.name, archive.open(header).read()) for header in archive.infolist()]
    except (arpy.ArchiveFormatError, *ELF_READ_ERRORS):
        return None
    for name, member in members:
        held = pieces(member, shared=False)
        if held is None:
            return None
        label = name.decode("utf-8", "replace").rstrip("/")
        found.extend(Piece(f"{label}: {piece.place}", piece.digest) for piece in held)
    return tuple(found)


def pieces(data: bytes, *, shared: bool = True) -> tuple[Piece, ...] | None:
    """The device code of the file `data`, in order (empty: none); None where a part that
    must be device code cannot be read as such. With `shared` off (the file is an input
    of a link), a shared object holds none: the link does not copy its code."""
    if data[:4] == FATBIN_HEADER.pack(FATBIN_MAGIC, 0, 0, 0)[:4]:
        return _fatbin_pieces(data, FATBIN_FILE)
    if data.startswith(ELF_MAGIC):
        return _elf_pieces(data, shared=shared)
    if data.startswith(ARCHIVE_MAGIC):
        return _archive_pieces(data)
    return ()


def may_hold_device_code(head: bytes) -> bool:
    """Whether a file that starts with `head` (8 bytes) is one `pieces` reads."""
    fatbin = FATBIN_HEADER.pack(FATBIN_MAGIC, 0, 0, 0)[:4]
    return head.startswith((ELF_MAGIC, ARCHIVE_MAGIC, fatbin))


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """What a step's output makes of its inputs' device code."""

    made: tuple[str, ...]  # digests to record: the output's own, none where `foreign`
    foreign: tuple[str, ...]  # its inputs' digests that no step of this build made


def step_record(
    output: Sequence[Piece], inputs: Iterable[Sequence[Piece]], recorded: frozenset[str]
) -> StepRecord:
    """The pieces of a step's `output` that none of its `inputs` holds are what the step
    made; they are recorded only where every piece of the inputs is `recorded`."""
    held = {piece.digest for part in inputs for piece in part}
    foreign = tuple(sorted(held - recorded))
    if foreign:
        return StepRecord(made=(), foreign=foreign)
    made = tuple(dict.fromkeys(p.digest for p in output if p.digest not in held))
    return StepRecord(made=made, foreign=())


@dataclass(frozen=True, kw_only=True)
class ForeignCode:
    """A member of the wheel with device code that no step of this build made."""

    name: str
    foreign: tuple[Piece, ...] = ()
    total: int = 0
    unreadable: bool = False


def foreign_device_code(
    members: Iterable[tuple[str, bytes]], recorded: frozenset[str]
) -> tuple[ForeignCode, ...]:
    """The members among the wheel's `members` (name, bytes) whose device code is not all
    among the `recorded` digests."""
    found: list[ForeignCode] = []
    for name, data in members:
        held = pieces(data)
        if held is None:
            found.append(ForeignCode(name=name, unreadable=True))
            continue
        foreign = tuple(piece for piece in held if piece.digest not in recorded)
        if foreign:
            found.append(ForeignCode(name=name, foreign=foreign, total=len(held)))
    return tuple(found)


def _described(item: ForeignCode, origins: Mapping[str, str]) -> str:
    if item.unreadable:
        return f"{item.name} (its device code cannot be read as fatbins)"
    named = []
    for piece in item.foreign:
        came = origins.get(piece.digest)
        where = f"from {came}" if came else "no compile here made it"
        named.append(f"{piece.place} {piece.digest[:SHORT]}, {where}")
    return f"{item.name} ({len(item.foreign)} of {item.total} fatbins: {'; '.join(named)})"


def foreign_code_problem(
    found: Sequence[ForeignCode], *, recorded: int, origins: Mapping[str, str] | None = None
) -> str | None:
    """The cell's failure, where its wheel holds device code that this build did not
    make (None: every piece is one that a step of this build made). `origins` says, per
    digest, which input of a step of this build brought it."""
    if not found:
        return None
    named = ", ".join(_described(item, origins or {}) for item in found)
    causes = f"likely {DOWNLOAD_CAUSE}, or {CARRIED_CAUSE}"
    if recorded == 0:
        return (
            f"no CUDA compile of this build wrote device code, yet the wheel holds some: "
            f"{named}; the binaries were not built here: {causes}"
        )
    return f"the wheel holds device code that no compile of this build wrote: {named}; {causes}"


# ---------------------------------------------------------------- edge


def recorded_digests(records: Path) -> frozenset[str]:
    """The digests recorded in `records` (none where it does not exist yet)."""
    if not records.is_dir():
        return frozenset()
    return frozenset(path.name for path in records.iterdir() if path.is_file())


def recorded_origins(records: Path) -> dict[str, str]:
    """Per unrecorded digest, the note of which input of a step brought it."""
    origins = records / ORIGINS
    if not origins.is_dir():
        return {}
    return {
        path.name: path.read_text(encoding="utf-8", errors="replace").strip()
        for path in origins.iterdir()
        if path.is_file() and not path.name.startswith(".")
    }


def held_to_compiles(wheel: Path, records: Path) -> str | None:
    """The cell's failure where a member of the wheel (a shared object, an object, a
    static library, a fatbin or cubin file, whatever its name) holds device code that no
    step of this build made (release.backends.compiled); None where all of it is this
    build's, or the wheel is not a zip (the inspection says so)."""
    recorded = recorded_digests(records)
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                (info.filename, archive.read(info))
                for info in archive.infolist()
                if _member_may_hold_device_code(archive, info)
            ]
    except (zipfile.BadZipFile, OSError):
        return None
    found = foreign_device_code(members, recorded)
    return foreign_code_problem(found, recorded=len(recorded), origins=recorded_origins(records))


def _member_may_hold_device_code(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    if info.is_dir():
        return False
    with archive.open(info) as stream:
        return may_hold_device_code(stream.read(8))
