"""What an ELF file of a wheel needs at load time, read from real ELF files (tests/data)."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from release.inspection.elffacts import elf_facts, machine_problem, read_member, wheel_elfs

DATA = Path(__file__).parent.parent / "data"


def test_needed_libraries_and_symbol_versions_are_read() -> None:
    facts = read_member("a.so", (DATA / "elf" / "x86_64-glibc2.34.so").read_bytes())
    assert facts.machine == "EM_X86_64"
    assert facts.needed == ("libc.so.6",)
    assert facts.symbol_versions == (("libc.so.6", "GLIBC_2.34"),)
    cudart = read_member("b.so", (DATA / "elf" / "x86_64-needs-cudart.so").read_bytes())
    assert "libcudart.so.12" in cudart.needed


def test_device_sections_and_another_machine() -> None:
    device = read_member("d.so", (DATA / "elf-device" / "x86_64-nv_fatbin.so").read_bytes())
    assert device.device_sections == (".nv_fatbin",)
    arm = read_member("k/lib.so", (DATA / "elf" / "aarch64-glibc2.28.so").read_bytes())
    assert machine_problem(arm, "aarch64") is None
    assert machine_problem(arm, "x86_64") == (
        "k/lib.so is built for EM_AARCH64, the wheel's platform is x86_64"
    )


def test_a_file_that_is_not_elf_says_so() -> None:
    facts = elf_facts("x.so", io.BytesIO(b"not an ELF file at all"))
    assert facts.unreadable is not None
    assert facts.unreadable.startswith("is not an ELF file")
    assert machine_problem(facts, "x86_64") == f"x.so {facts.unreadable}"


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        # the first PT_LOAD (program header 1, at 64 + 56) claims a megabyte: p_filesz
        (lambda data: data[:152] + struct.pack("<Q", 2**20) + data[160:], "a loadable segment"),
        (lambda data: data[:16] + struct.pack("<H", 1) + data[18:], "ET_REL: not a shared object"),
        (lambda data: data[:32] + struct.pack("<Q", 2**40) + data[40:], "program headers lie past"),
    ],
    ids=["truncated", "relocatable", "headers-past-the-end"],
)
def test_a_file_the_loader_could_not_map_is_not_a_shared_object(
    patch: Callable[[bytes], bytes], why: str
) -> None:
    data = (DATA / "elf" / "x86_64-glibc2.34.so").read_bytes()
    facts = read_member("k/_C.so", patch(data))
    assert facts.unreadable is not None
    assert why in facts.unreadable


def test_every_shared_object_of_a_wheel_in_archive_order() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("k/a.so", (DATA / "elf" / "x86_64-glibc2.28.so").read_bytes())
        archive.writestr("k/readme.txt", b"text")
        archive.writestr("k/b.so.1", (DATA / "elf" / "x86_64-needs-cudart.so").read_bytes())
    with zipfile.ZipFile(buffer) as archive:
        found = list(wheel_elfs(archive))
    assert [f.member for f in found] == ["k/a.so", "k/b.so.1"]
    assert "libcudart.so.12" in found[1].needed


def looping_versions(count: int) -> bytes:
    """x86_64-glibc2.28.so whose .gnu.version_r claims `count` entries and whose first
    entry and auxiliary each point back at themselves (vn_next, vna_next 0)."""
    data = bytearray((DATA / "elf" / "x86_64-glibc2.28.so").read_bytes())
    table = struct.unpack_from("<Q", data, 0x28)[0]
    for index in range(struct.unpack_from("<H", data, 0x3C)[0]):
        header = table + index * 64
        if struct.unpack_from("<I", data, header + 4)[0] == 0x6FFFFFFE:  # SHT_GNU_verneed
            start = struct.unpack_from("<Q", data, header + 0x18)[0]
            struct.pack_into("<I", data, header + 0x2C, count)  # sh_info: the entries
            struct.pack_into("<H", data, start + 2, 0xFFFF)  # vn_cnt
            struct.pack_into("<I", data, start + 12, 0)  # vn_next
            aux = start + struct.unpack_from("<I", data, start + 8)[0]
            struct.pack_into("<I", data, aux + 12, 0)  # vna_next
    return bytes(data)


@pytest.mark.parametrize("count", [0xFFFFFFFF, 1])
def test_a_version_section_whose_entries_loop_is_not_read_without_end(count: int) -> None:
    facts = read_member("demo/_lib.so", looping_versions(count))
    assert facts.unreadable is not None
    assert facts.unreadable.startswith("is not an ELF file (.gnu.version_r")


def with_dynamic(
    entries: list[tuple[int, int]], *, size: int | None = None, tail: bytes = b""
) -> bytes:
    """A real library whose .dynamic section, and the loader's table (PT_DYNAMIC) with it, is
    moved to the end of the file and holds `entries` (d_tag, d_val), its DT_STRTAB and a
    DT_NULL, after `tail` (both headers say `size` bytes)."""
    data = (DATA / "elf" / "x86_64-glibc2.34.so").read_bytes()
    elf = ELFFile(io.BytesIO(data))
    sections = [s.name for s in elf.iter_sections()]
    header = elf.header["e_shoff"] + sections.index(".dynamic") * elf.header["e_shentsize"]
    dynamic = elf.get_section_by_name(".dynamic")
    assert isinstance(dynamic, DynamicSection)
    strtab = next(t.entry.d_val for t in dynamic.iter_tags("DT_STRTAB"))
    rows = [*entries, (5, strtab), (0, 0)]  # 5: DT_STRTAB
    table = b"".join(struct.pack("<qQ", tag, value) for tag, value in rows)
    size = len(table) if size is None else size
    changed = bytearray(data + tail + table + bytes(max(0, size - len(table))))
    changed[header + 24 : header + 40] = struct.pack("<QQ", len(data) + len(tail), size)
    kinds = [s["p_type"] for s in elf.iter_segments()]
    segment = elf.header["e_phoff"] + kinds.index("PT_DYNAMIC") * elf.header["e_phentsize"]
    changed[segment + 8 : segment + 16] = struct.pack("<Q", len(data) + len(tail))  # p_offset
    changed[segment + 32 : segment + 40] = struct.pack("<Q", size)  # p_filesz
    return bytes(changed)


def test_a_needed_list_past_any_real_ones_bounds_is_refused() -> None:
    # 60,000 DT_NEEDED entries, each one byte further into one 60 KB string, took 1.7 GB
    data = (DATA / "elf" / "x86_64-glibc2.34.so").read_bytes()
    elf = ELFFile(io.BytesIO(data))
    dynamic, strings = elf.get_section_by_name(".dynamic"), elf.get_section_by_name(".dynstr")
    assert isinstance(dynamic, DynamicSection)
    assert strings is not None
    libc = next(t.entry.d_val for t in dynamic.iter_tags("DT_NEEDED"))
    assert read_member("ok.so", with_dynamic([(1, libc)] * 1000)).needed == ("libc.so.6",) * 1000
    many = read_member("k/_C.so", with_dynamic([(1, libc)] * 1001))
    assert many.unreadable == "is not an ELF file (more than 1000 DT_NEEDED entries)"
    long = read_member("k/_C.so", with_dynamic([], size=16 * 10_001))
    assert long.unreadable == "is not an ELF file (.dynamic has 10001 entries (at most 10000))"
    unended = with_dynamic([(1, len(data) - strings["sh_offset"])], tail=b"a" * 5000)
    assert read_member("k/_C.so", unended).unreadable == (
        "is not an ELF file (a DT_NEEDED name is not ended within 4096 bytes)"
    )


def test_what_links_is_read_where_the_loader_reads_it() -> None:
    """A library with its section headers stripped (sstrip), or a `.dynamic` section that is
    a decoy beside the loader's table (PT_DYNAMIC), was read as linking nothing: a +cu129
    wheel needing libcudart.so.13, or GLIBC_2.34 under manylinux_2_28, passed as clean."""
    data = (DATA / "elf" / "x86_64-glibc2.34.so").read_bytes()
    assert read_member("ok.so", data).needed == ("libc.so.6",)
    stripped = data[:40] + struct.pack("<Q", 0) + data[48:60] + struct.pack("<HH", 0, 0) + data[64:]
    assert read_member("k/_C.so", stripped).unreadable == (
        "is not an ELF file (no section headers (stripped): what it links cannot be checked)"
    )
    elf = ELFFile(io.BytesIO(data))
    dynamic = elf.get_section_by_name(".dynamic")
    assert isinstance(dynamic, DynamicSection)
    libc = next(t.entry.d_val for t in dynamic.iter_tags("DT_NEEDED"))
    decoy = bytearray(with_dynamic([(1, libc), (1, libc)]))
    kinds = [s["p_type"] for s in elf.iter_segments()]
    segment = elf.header["e_phoff"] + kinds.index("PT_DYNAMIC") * elf.header["e_phentsize"]
    decoy[segment : segment + 56] = data[segment : segment + 56]  # the loader's table as built
    assert read_member("k/_C.so", bytes(decoy)).unreadable == (
        "is not an ELF file (its .dynamic section names ['libc.so.6', 'libc.so.6'], the "
        "loader's table (PT_DYNAMIC) ['libc.so.6'])"
    )


def test_a_32_bit_library_of_the_x86_64_machine_is_not_an_x86_64_one() -> None:
    """An x32 library (ELFCLASS32, EM_X86_64) passed in an x86_64 wheel: no 64-bit Python
    loads it."""
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)  # ELFCLASS32, little-endian, version 1
    header = ident + struct.pack("<HHIIIIIHHHHHH", 3, 62, 1, 0, 52, 0, 0, 52, 32, 1, 40, 0, 0)
    load = struct.pack("<IIIIIIII", 1, 0, 0, 0, 84, 84, 5, 0x1000)  # one PT_LOAD of the file
    facts = read_member("k/_c.so", header + load)
    assert (facts.unreadable, facts.machine) == (None, "EM_X86_64 (32-bit)")
    assert machine_problem(facts, "x86_64") == (
        "k/_c.so is built for EM_X86_64 (32-bit), the wheel's platform is x86_64"
    )
