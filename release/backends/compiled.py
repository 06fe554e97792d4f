"""What this build's CUDA compiles wrote, and whether a wheel's device code is theirs.

After each CUDA compile that writes an object, the compile wrapper
(release.toolchain.nvccwrap) records the sha256 of every fatbin in the object's device-code
section: one empty file named by the digest in the cell's records directory
(RELEASE_COMPILE_RECORDS), so parallel compiles never write one file with two contents. A
link copies each object's fatbins into the shared object's section whole, one after
another with zero padding between, so every fatbin of a shared object this build linked is
one that a compile of this build wrote. `foreign_device_code` holds a built wheel to that:
device code that no compile of this build wrote came from elsewhere, a prebuilt wheel that
a setup.py downloaded instead of building, or a shared object cached in the sources.

With relocatable device code the shared object's `.nv_fatbin` is what the device link
made (no compile launcher sees it); its `__nv_relfatbin` fatbins, copied from the
objects, are the ones held to the records.

Pure: `fatbins`, `digests`, `foreign_device_code`, `foreign_code_problem`.
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

# fatBinaryHeader of CUDA's fatbinary.h: magic, version, header size, size after the header
FATBIN_HEADER = struct.Struct("<IHHQ")
FATBIN_MAGIC = 0xBA55ED50
LINKED_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"
LIKELY_CAUSES = (
    "a setup.py that downloads a prebuilt wheel instead of building (flash-attention's "
    "family does unless <NAME>_FORCE_BUILD=TRUE: set it in matrix.yaml's build.env), or a "
    "shared object that the sources carry"
)


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


def _sections(data: bytes) -> dict[str, bytes]:
    try:
        elf = ELFFile(io.BytesIO(data))
        return {
            section.name: section.data()
            for section in elf.iter_sections()
            if section.name in (LINKED_SECTION, RELOCATABLE_SECTION)
        }
    except (ELFError, ValueError, OSError, struct.error, OverflowError, LookupError, TypeError):
        return {}  # pyelftools on a damaged file: no section it can read


def digests(data: bytes) -> tuple[str, ...] | None:
    """The sha256 of each fatbin of the ELF file `data` that a compile of this build would
    have written (empty: no device code); None where a section cannot be read as fatbins."""
    sections = _sections(data)
    if RELOCATABLE_SECTION in sections:
        sections.pop(LINKED_SECTION, None)
    found: list[str] = []
    for section in sections.values():
        parts = fatbins(section)
        if parts is None:
            return None
        found.extend(hashlib.sha256(part).hexdigest() for part in parts)
    return tuple(found)


@dataclass(frozen=True, kw_only=True)
class ForeignCode:
    """A shared object of the wheel with device code that no compile of this build wrote."""

    name: str
    foreign: int  # fatbins not written here (all of them where `unreadable`)
    total: int
    unreadable: bool = False


def foreign_device_code(
    members: Iterable[tuple[str, bytes]], recorded: frozenset[str]
) -> tuple[ForeignCode, ...]:
    """The shared objects among the wheel's `members` (name, bytes) whose device code is
    not all among the `recorded` fatbin digests."""
    found: list[ForeignCode] = []
    for name, data in members:
        held = digests(data)
        if held is None:
            found.append(ForeignCode(name=name, foreign=0, total=0, unreadable=True))
            continue
        foreign = [digest for digest in held if digest not in recorded]
        if foreign:
            found.append(ForeignCode(name=name, foreign=len(foreign), total=len(held)))
    return tuple(found)


def foreign_code_problem(found: Sequence[ForeignCode], *, recorded: int) -> str | None:
    """The cell's failure, where its wheel holds device code that this build did not
    compile (None: every fatbin is one that a compile of this build wrote)."""
    if not found:
        return None
    named = ", ".join(
        f"{item.name} (its device code cannot be read as fatbins)"
        if item.unreadable
        else f"{item.name} ({item.foreign} of {item.total} fatbins)"
        for item in found
    )
    if recorded == 0:
        return (
            f"no CUDA compile of this build wrote device code, yet the wheel holds some: {named}; "
            f"the binaries were not built here: likely {LIKELY_CAUSES}"
        )
    return (
        f"the wheel holds device code that no compile of this build wrote: {named}; "
        f"likely {LIKELY_CAUSES}"
    )
