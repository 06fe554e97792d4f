"""Hostile bytes a server may hand `release audit` (and verify): each is a finding of its
rule, on one line, never an exception out of the inspection. The wheels are small real
ones (tests/integration/wheels.py) holding a real ELF file (tests/data/elf) with one field
of its headers changed, or a zip changed where the reader trusts it."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from release.inspection.elffacts import read_member
from release.inspection.served import inspect_served
from release.wheelfile import MAX_HEADERS_FILE, WheelName, version_or_none
from tests.integration.wheels import MODULE, VERSION, make_wheel

ELF = (Path(__file__).parent.parent / "data" / "elf" / "x86_64-glibc2.28.so").read_bytes()
URL = "http://files.test/"
DIST_INFO = f"{MODULE}-{VERSION}.dist-info"
# Elf64_Shdr: sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, ...
SECTION_FIELDS = {"sh_type": (4, "<I"), "sh_offset": (24, "<Q"), "sh_link": (40, "<I")}


def with_section_field(section: str, field: str, value: int) -> bytes:
    """The ELF file with one field of one section header set to `value`."""
    elf = ELFFile(io.BytesIO(ELF))
    index = [s.name for s in elf.iter_sections()].index(section)
    offset, layout = SECTION_FIELDS[field]
    at = elf.header["e_shoff"] + index * elf.header["e_shentsize"] + offset
    changed = bytearray(ELF)
    changed[at : at + struct.calcsize(layout)] = struct.pack(layout, value)
    return bytes(changed)


def findings(path: Path) -> list[tuple[str, str]]:
    served = inspect_served(path.name, path, url=URL + path.name)
    for found in served.findings:
        assert "\n" not in found.detail
        assert "\n" not in found.file
    return [(f.rule, f.detail) for f in served.findings]


def rezipped(wheel: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    """`wheel` written again with its members as `change` leaves them."""
    with zipfile.ZipFile(wheel) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    change(members)
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 12, 6, 0, 0, 0)), data)
    return wheel


@pytest.mark.parametrize(
    ("section", "field", "value", "why"),
    [
        # auditwheel finds it by name and calls a method only a version section has
        (".gnu.version_r", "sh_type", 1, ".gnu.version_r is a section of type SHT_PROGBITS"),
        # pyelftools asserts .dynamic links a string table, as the DT_NEEDED reading does
        (".dynamic", "sh_link", 0, ".dynamic is linked to no string table"),
        # an offset past 2**63: struct cannot pack it
        (".dynstr", "sh_offset", 2**64 - 1, "not an ELF file"),
    ],
)
def test_an_elf_header_field_the_readers_trust_is_a_finding(
    tmp_path: Path, section: str, field: str, value: int, why: str
) -> None:
    library = with_section_field(section, field, value)
    wheel = make_wheel(tmp_path, members={f"{MODULE}/_C.so": library})
    found = findings(wheel)
    assert [rule for rule, _ in found] == ["manylinux"], found
    assert found[0][1].startswith(f"{MODULE}/_C.so is not an ELF file (")
    assert why in found[0][1]
    in_memory = read_member("_C.so", library)  # the build's reading, from bytes
    assert in_memory.unreadable is not None


@pytest.mark.parametrize(
    "record",
    [
        b"a,b,c\rd,e,f\n",  # a bare carriage return
        b"x," + b"y" * 200_000 + b",1\n",  # a field over the csv module's limit
    ],
)
def test_a_record_the_csv_module_refuses_is_a_finding(tmp_path: Path, record: bytes) -> None:
    wheel = rezipped(make_wheel(tmp_path), lambda m: m.update({f"{DIST_INFO}/RECORD": record}))
    said = [(rule, detail[: detail.find(" (")]) for rule, detail in findings(wheel)]
    assert ("archive", f"{DIST_INFO}/RECORD is not CSV") in said


def test_a_zip_that_asks_a_newer_zip_version_is_not_a_zip(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    data = bytearray(wheel.read_bytes())
    central = data.find(b"PK\x01\x02")
    data[central + 6 : central + 8] = struct.pack("<H", 100)  # version needed: 10.0
    wheel.write_bytes(bytes(data))
    assert findings(wheel) == [("archive", "the file is not a zip archive")]


def test_a_member_of_no_name(tmp_path: Path) -> None:
    wheel = rezipped(make_wheel(tmp_path), lambda m: m.update({"": b"x"}))
    assert findings(wheel) == [("archive", "the file is a zip archive with a member of no name")]


def test_a_metadata_past_its_bound_is_not_parsed(tmp_path: Path) -> None:
    def huge(members: dict[str, bytes]) -> None:
        members[f"{DIST_INFO}/METADATA"] += b"x" * (MAX_HEADERS_FILE + 1)

    found = findings(rezipped(make_wheel(tmp_path), huge))
    assert found == [
        ("archive", f"the wheel: not a readable zip file ({DIST_INFO}/METADATA is over 8 MiB)")
    ]


def test_a_shared_object_that_inflates_a_thousand_times_is_a_zip_bomb(tmp_path: Path) -> None:
    bomb = ELF + bytes(80 * 2**20)
    wheel = make_wheel(tmp_path, members={f"{MODULE}/_C.so": bomb})
    found = findings(wheel)
    assert len(found) == 1
    assert found[0][0] == "archive"
    assert f"member '{MODULE}/_C.so' inflates" in found[0][1]
    assert "times its stored size (a zip bomb)" in found[0][1]


def test_numbers_of_more_digits_than_python_converts(tmp_path: Path) -> None:
    huge = "1" * 5000
    with pytest.raises(ValueError, match=r"a number too long to read"):
        WheelName.parse(f"x-{huge}-py3-none-any.whl")
    assert version_or_none(huge) is None
    wheel = make_wheel(tmp_path, metadata_version=huge)
    found = findings(wheel)
    assert [rule for rule, _ in found] == ["filename"]
    assert found[0][1].startswith("METADATA Version is '1111")


def test_a_wheel_tag_that_is_not_ascii(tmp_path: Path) -> None:
    def tagged(members: dict[str, bytes]) -> None:
        wheel = members[f"{DIST_INFO}/WHEEL"]
        members[f"{DIST_INFO}/WHEEL"] = wheel.replace(b"Tag: py3", b"Tag: p\xe9y3")

    found = findings(rezipped(make_wheel(tmp_path), tagged))
    assert "filename" in [rule for rule, _ in found]


def test_a_listed_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    served = inspect_served("x-1.0-py3-none-any\n.whl", wheel, url=URL)
    assert [(f.rule, f.file) for f in served.findings] == [("archive", "x-1.0-py3-none-any\\n.whl")]
    assert "a space or a control character" in served.findings[0].detail
