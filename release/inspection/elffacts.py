"""What one ELF file of a wheel says it needs at load time, read with pyelftools: its
machine, the libraries it NEEDs, the symbol versions it asks of them (auditwheel's own
reading, `elf_find_versioned_symbols`: the versions of the dynamic loader left out) and its
device-code sections.

`elf_facts` reads from a seekable stream, section by section, so a shared object of a
gigabyte is never held in memory whole; `wheel_elfs` copies each shared object of an open
wheel to one scratch file at a time and reads it there.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from auditwheel.elfutils import elf_find_versioned_symbols  # type: ignore[import-untyped]
from elftools.elf.elffile import ELFFile

from release.elfread import ELF_READ_ERRORS, needed_names
from release.inspection.devicecode import DEVICE_SECTIONS, is_shared_object
from release.targets import ELF_MACHINES
from release.ziparchive import inflation_problem


@dataclass(frozen=True, kw_only=True)
class ElfFacts:
    member: str  # its path inside the wheel
    machine: str = ""  # e_machine as pyelftools names it: EM_X86_64 (`EM_X86_64 (32-bit)`: x32)
    needed: tuple[str, ...] = ()  # DT_NEEDED, in order
    symbol_versions: tuple[tuple[str, str], ...] = ()  # (library, GLIBC_2.34), sorted
    device_sections: tuple[str, ...] = ()
    unreadable: str | None = None  # why it is not an ELF file


def elf_facts(member: str, stream: BinaryIO) -> ElfFacts:
    """The facts of the ELF file in `stream` (named `member` in messages)."""
    try:
        elf = ELFFile(stream)
        _check_loadable(elf, stream)
        needed = needed_names(elf)
        _check_version_sections(elf)
        versions = tuple(sorted({(str(lib), str(v)) for lib, v in elf_find_versioned_symbols(elf)}))
        sections = tuple(sorted(DEVICE_SECTIONS.intersection(s.name for s in elf.iter_sections())))
        machine = str(elf.header["e_machine"])
        if elf.elfclass != 64:  # x32 is EM_X86_64 too, and no 64-bit Python loads it
            machine += f" ({elf.elfclass}-bit)"
    except ELF_READ_ERRORS as error:
        return ElfFacts(member=member, unreadable=f"is not an ELF file ({_why(error)})")
    return ElfFacts(
        member=member,
        machine=machine,
        needed=needed,
        symbol_versions=versions,
        device_sections=sections,
    )


def _check_loadable(elf: ELFFile, stream: BinaryIO) -> None:
    """ValueError where the dynamic loader could not map the file: not a shared object or
    an executable (a relocatable object named .so), program header entries of another size
    than the loader reads, or a program header table or a loadable segment that lies past
    the end of the file (a truncated copy)."""
    header = elf.header
    if header["e_type"] not in ("ET_DYN", "ET_EXEC"):
        raise ValueError(f"{header['e_type']}: not a shared object the loader can map")
    size = stream.seek(0, io.SEEK_END)
    if header["e_phnum"] == 0:
        raise ValueError("no program headers: not a shared object the loader can map")
    entry = elf.structs.Elf_Phdr.sizeof()
    if header["e_phentsize"] != entry:
        raise ValueError(
            f"program header entries of {header['e_phentsize']} bytes, where the loader "
            f"reads {entry}: not a shared object the loader can map"
        )
    if header["e_phoff"] + header["e_phnum"] * header["e_phentsize"] > size:
        raise ValueError("its program headers lie past the end of the file")
    for segment in elf.iter_segments():
        if segment["p_type"] == "PT_LOAD" and segment["p_offset"] + segment["p_filesz"] > size:
            raise ValueError("a loadable segment lies past the end of the file")


def _why(error: Exception) -> str:
    """An error of a reader as a message says it (an assert of pyelftools has no text)."""
    return str(error) or f"its reader's {type(error).__name__} on its headers"


# the symbol-version sections auditwheel's reading finds by name, with the type each must be
_VERSION_SECTIONS = {".gnu.version_r": "SHT_GNU_verneed", ".gnu.version_d": "SHT_GNU_verdef"}


def _check_version_sections(elf: ELFFile) -> None:
    """ValueError where a symbol-version section is of another type than its name says, or
    claims more entries than its bytes hold: its reader would walk an entry that points
    back at itself (vn_next 0) without end."""
    for name, kind in _VERSION_SECTIONS.items():
        named = elf.get_section_by_name(name)
        if named is not None and named["sh_type"] != kind:
            raise ValueError(f"{name} is a section of type {named['sh_type']}, not {kind}")
    for section in elf.iter_sections():
        if section["sh_type"] not in ("SHT_GNU_verneed", "SHT_GNU_verdef"):
            continue
        limit = section["sh_size"] // 8 + 1  # no entry nor auxiliary is under 8 bytes
        if section["sh_info"] > limit:
            raise ValueError(f"{section.name} claims {section['sh_info']} entries")
        walked = 0
        for _, auxiliaries in section.iter_versions():  # type: ignore[attr-defined]
            for _ in auxiliaries:
                walked += 1
                if walked > limit:
                    raise ValueError(f"{section.name}'s entries do not end")


def machine_problem(facts: ElfFacts, arch: str) -> str | None:
    """Why the ELF file is not one of `arch`'s machine (None: it is, or `arch` is one this
    tool does not know the machine of)."""
    if facts.unreadable is not None:
        return f"{facts.member} {facts.unreadable}"
    wanted = ELF_MACHINES.get(arch)
    if wanted is None or facts.machine == wanted:
        return None
    return f"{facts.member} is built for {facts.machine}, the wheel's platform is {arch}"


def read_member(member: str, data: bytes) -> ElfFacts:
    """`elf_facts` of a member's bytes already in memory."""
    return elf_facts(member, io.BytesIO(data))


def wheel_elfs(archive: zipfile.ZipFile) -> Iterator[ElfFacts]:
    """The facts of every shared object (`*.so`, `*.so.*`) of `archive`, in archive order,
    each copied to a scratch file of its own and read there (one at a time on disk); one
    that `inflation_problem` refuses is unreadable, uncopied."""
    with tempfile.TemporaryDirectory(prefix="release-elf-") as tmp:
        scratch = Path(tmp) / "member"
        for info in archive.infolist():
            if info.is_dir() or not is_shared_object(info.filename):
                continue
            refused = inflation_problem(info)
            if refused is not None:
                yield ElfFacts(member=info.filename, unreadable=f"is not read: it {refused}")
                continue
            with archive.open(info) as source, scratch.open("wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
            with scratch.open("rb") as stream:
                yield elf_facts(info.filename, stream)
            scratch.unlink()
