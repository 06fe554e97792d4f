"""What reading a damaged or hostile ELF file raises, in one tuple for every reader of one,
and the DT_NEEDED list read within bounds (`needed_names`).

pyelftools and auditwheel's reading of it take a file's headers at their word: besides
ELFError, a section that is not what its name says (a `.gnu.version_r` of another type) is an
AttributeError, a `.dynamic` linked to section 0 an AssertionError, an offset past 2**63 an
OverflowError, a table cut short a struct.error or an IndexError. Each is the file's damage,
not this program's bug: a reader says "not an ELF file (why)" for it.
"""

from __future__ import annotations

import struct

from elftools.common.exceptions import ELFError
from elftools.common.utils import struct_parse
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import StringTableSection

ELF_READ_ERRORS: tuple[type[Exception], ...] = (
    ELFError,
    ValueError,
    OSError,
    EOFError,
    LookupError,  # KeyError, IndexError
    struct.error,
    AssertionError,
    AttributeError,
    OverflowError,
    TypeError,
)

# What a DT_NEEDED list is read to, past which the file is refused: a real shared object has
# fewer than 100 .dynamic entries (libtorch_cuda.so about 40), each soname far below
# PATH_MAX. Read unbounded, 60,000 entries into one 60 KB string took 1.7 GB.
MAX_DYNAMIC_ENTRIES = 10_000
MAX_NEEDED = 1_000
MAX_SONAME = 4096


def needed_names(elf: ELFFile) -> tuple[str, ...]:
    """The DT_NEEDED sonames of every `.dynamic` section of `elf`, in order, read within the
    bounds above (ValueError past them), each name from its string table with no more
    than MAX_SONAME bytes read. ValueError too where they are not what the loader reads
    (`loader_needed`): the sections are what every reader of symbol versions reads, so a
    file whose section headers are stripped, or whose `.dynamic` section is a decoy beside
    the table the loader reads, cannot be checked, and is not taken as clean."""
    named = _section_needed(elf)
    loaded = loader_needed(elf)
    if loaded is not None and elf.num_sections() == 0:
        raise ValueError("no section headers (stripped): what it links cannot be checked")
    if loaded is not None and loaded != named:
        raise ValueError(
            f"its .dynamic section names {list(named)[:4]}, the loader's table (PT_DYNAMIC) "
            f"{list(loaded)[:4]}"
        )
    return named


def loader_needed(elf: ELFFile) -> tuple[str, ...] | None:
    """The DT_NEEDED sonames as the loader reads them: from the PT_DYNAMIC segment, each name
    from DT_STRTAB's address mapped through a PT_LOAD segment; None without PT_DYNAMIC."""
    dynamic = next((s for s in elf.iter_segments() if s["p_type"] == "PT_DYNAMIC"), None)
    if dynamic is None:
        return None
    tags = _dynamic_tags(elf, dynamic["p_offset"], dynamic["p_filesz"], "PT_DYNAMIC")
    needed = _needed_values(tags)
    if not needed:
        return ()
    address = next((value for name, value in tags if name == "DT_STRTAB"), None)
    strings = _file_offset(elf, address) if address is not None else None
    if strings is None:
        raise ValueError("PT_DYNAMIC's DT_STRTAB lies in no loadable segment")
    return tuple(_soname(elf, strings + value) for value in needed)


def _file_offset(elf: ELFFile, address: int) -> int | None:
    for segment in elf.iter_segments():
        start = segment["p_vaddr"]
        if segment["p_type"] == "PT_LOAD" and start <= address < start + segment["p_filesz"]:
            return int(segment["p_offset"] + address - start)
    return None


def _section_needed(elf: ELFFile) -> tuple[str, ...]:
    names: list[str] = []
    for section in elf.iter_sections():
        if not isinstance(section, DynamicSection) or section["sh_type"] == "SHT_NOBITS":
            continue
        strings = elf.get_section(section["sh_link"])
        if not isinstance(strings, StringTableSection):
            raise ValueError(f"{section.name} is linked to no string table")
        tags = _dynamic_tags(elf, section["sh_offset"], section["sh_size"], section.name)
        needed = _needed_values(tags, already=len(names))
        names += [_soname(elf, strings["sh_offset"] + value) for value in needed]
    return tuple(names)


def _dynamic_tags(elf: ELFFile, offset: int, size: int, what: str) -> list[tuple[str, int]]:
    """The (d_tag, d_val) entries of a dynamic table of `size` bytes at `offset`, up to its
    DT_NULL; ValueError past MAX_DYNAMIC_ENTRIES (`what` names the table)."""
    entry = elf.structs.Elf_Dyn
    count = size // entry.sizeof()
    if count > MAX_DYNAMIC_ENTRIES:
        raise ValueError(f"{what} has {count} entries (at most {MAX_DYNAMIC_ENTRIES})")
    tags: list[tuple[str, int]] = []
    for n in range(count):
        tag = struct_parse(entry, elf.stream, stream_pos=offset + n * entry.sizeof())
        if tag["d_tag"] == "DT_NULL":
            break
        tags.append((str(tag["d_tag"]), int(tag["d_val"])))
    return tags


def _needed_values(tags: list[tuple[str, int]], *, already: int = 0) -> list[int]:
    """The DT_NEEDED string offsets of `tags`; ValueError past MAX_NEEDED in all (`already`:
    those of tables read before)."""
    needed = [value for name, value in tags if name == "DT_NEEDED"]
    if already + len(needed) > MAX_NEEDED:
        raise ValueError(f"more than {MAX_NEEDED} DT_NEEDED entries")
    return needed


def _soname(elf: ELFFile, offset: int) -> str:
    elf.stream.seek(offset)
    name, end, _ = elf.stream.read(MAX_SONAME + 1).partition(b"\0")
    if not end:
        raise ValueError(f"a DT_NEEDED name is not ended within {MAX_SONAME} bytes")
    return name.decode("utf-8", errors="replace")
