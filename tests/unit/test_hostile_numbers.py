"""Numbers and names from outside that ended `release audit` in a traceback or passed as
sound: a digit string longer than int() reads (4,300 digits) or a digit int() reads that is
not an ASCII one, in a wheel's ELF files, its METADATA or a torch index's; a zip member held
twice or named under a drive; program headers the loader would refuse; a URL argument with
white space, whose password no mask can find the end of."""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement

from release import pep508
from release.audit.sources import source
from release.inspection.cudalibs import cuda_needs, torch_requirements, unparsed_requirements
from release.inspection.elffacts import ElfFacts, elf_facts
from release.inspection.fatbin import parse_cuobjdump_listing
from release.inspection.symbols import symbol_problems
from release.inspection.torchcuda import cuda_of_label, cuda_of_metadata
from release.ziparchive import zip_problem

NINES = "9" * 4400
ELF = Path(__file__).parent.parent / "data" / "elf"


def test_a_requirement_with_a_number_int_cannot_read_is_not_pep_508() -> None:
    """packaging parses `torch>=2.999...` and then raises ValueError comparing it (pip
    fails the same way): the line is refused as packaging refuses a line it cannot parse."""
    with pytest.raises(InvalidRequirement, match="a number of 4400 digits"):
        pep508.requirement(f"torch>=2.{NINES}")
    line = f"torch>=2.{NINES}"
    assert unparsed_requirements([line, "torch>=2.11"]) == [line]
    assert [str(r) for r in torch_requirements([line, "torch>=2.11"], "x86_64")] == ["torch>=2.11"]
    assert str(pep508.requirement("torch==2.11.0+cu130")) == "torch==2.11.0+cu130"


def test_a_torch_index_metadata_with_numbers_int_cannot_read_names_no_cuda() -> None:
    for line in (
        f"nvidia-cuda-runtime-cu12>={NINES}",
        f"nvidia-cuda-runtime-cu12=={NINES}",
        f"nvidia-cublas-cu{NINES}",
        f"nvidia-cuda-runtime>={NINES}",
    ):
        metadata = f"Metadata-Version: 2.1\nName: torch\nRequires-Dist: {line}\n\n".encode()
        assert cuda_of_metadata(metadata, "x86_64").major is None, line
    assert cuda_of_label(f"cu{NINES}") is None
    runtime = b"Metadata-Version: 2.1\nName: torch\nRequires-Dist: nvidia-cuda-runtime==13.0.96\n"
    assert cuda_of_metadata(runtime, "x86_64").major == 13


def test_a_needed_library_or_symbol_version_int_cannot_read() -> None:
    huge = ElfFacts(member="k3/_c.so", machine="EM_X86_64", needed=(f"libcudart.so.{NINES}",))
    assert cuda_needs([huge]) == {}
    for version in (f"GLIBC_2.{NINES}", "GLIBC_2.\u00b2"):
        facts = ElfFacts(
            member="k3/_c.so", machine="EM_X86_64", symbol_versions=(("libc.so.6", version),)
        )
        ((member, detail),) = symbol_problems([facts], ["manylinux_2_28_x86_64"])
        assert member == "k3/_c.so"
        assert "allows at most GLIBC_2.28" in detail
    newer = ElfFacts(
        member="k3/_c.so",
        machine="EM_X86_64",
        symbol_versions=(("libc.so.6", "GLIBC_2.34"), ("libc.so.6", f"GLIBC_2.{NINES}")),
    )
    ((_, detail),) = symbol_problems([newer], ["manylinux_2_28_x86_64"])
    assert f"GLIBC_2.{NINES[:20]}" in detail, "the newest by value, not GLIBC_2.34"


def test_a_device_code_listing_with_an_sm_int_cannot_read() -> None:
    listing = f"ELF file    1: k.sm_{NINES}.cubin\nELF file    2: k.sm_90.cubin\n"
    assert parse_cuobjdump_listing(listing).sms == ("90",)


def test_program_headers_of_a_size_the_loader_refuses() -> None:
    library = bytearray((ELF / "x86_64-glibc2.28.so").read_bytes())
    assert elf_facts("k3/_c.so", io.BytesIO(bytes(library))).unreadable is None
    library[54:56] = (0).to_bytes(2, "little")  # e_phentsize of an ELF64 header
    facts = elf_facts("k3/_c.so", io.BytesIO(bytes(library)))
    assert facts.unreadable is not None
    assert "program header entries of 0 bytes, where the loader reads 56" in facts.unreadable


def zip_of(*names: str) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for number, name in enumerate(names):
            archive.writestr(name, f"member {number}\n")
    return data.getvalue()


def test_a_member_held_twice_or_under_a_drive_is_damage() -> None:
    """Which of two METADATA a reader takes is the reader's choice (one added a
    Requires-Dist the other lacked); C:/ lies outside the archive where it unpacks."""
    with pytest.warns(UserWarning, match="Duplicate name"):
        twice = zip_of("k3-1.0.dist-info/METADATA", "k3-1.0.dist-info/METADATA")
    assert zip_problem(twice) == "a zip archive that holds 'k3-1.0.dist-info/METADATA' twice"
    assert zip_problem(zip_of("C:/Windows/evil.py")) == (
        "a zip archive whose member 'C:/Windows/evil.py' lies outside it"
    )
    assert zip_problem(zip_of("k3/__init__.py", "k3-1.0.dist-info/METADATA")) is None


def test_a_url_argument_with_white_space_or_a_control_character_is_not_repeated() -> None:
    """`http://admin:Hunter2 Pass@host:x/` was shown up to the space: no mask finds where
    a password with a space ends. A control character made the audit run (exit 7)."""
    said = source("http://admin:Hunter2 Pass@127.0.0.1:notaport/p/", "argument 1")
    assert said == (
        "argument 1: a URL holds no white space or control character (write a space as %20)"
    )
    assert source("http://h/p/\x01x/", "argument 1") == (
        "argument 1: 'http://h/p/\\x01x/' holds white space or a control character"
    )
    assert source("http://h/p/\nerror: fake/", "argument 1") == (
        "argument 1: 'http://h/p/\\nerror: fake/' holds white space or a control character"
    )
    assert not isinstance(source("  https://pypi.org/simple/sgl-deep-gemm/ ", "argument 1"), str)


def test_a_member_named_otherwise_in_its_unicode_path_field_is_damage() -> None:
    """Python's zipfile ignores Info-ZIP's Unicode Path extra field; unzip and 7-Zip write
    the name it holds: `k3/ok.py` that unzip writes as `../../evil.py` passed as clean."""

    def zip_with(path_field: str) -> bytes:
        name = path_field.encode()
        field = b"\x01" + zlib.crc32(b"k3/ok.py").to_bytes(4, "little") + name
        info = zipfile.ZipInfo("k3/ok.py")
        info.extra = (0x7075).to_bytes(2, "little") + len(field).to_bytes(2, "little") + field
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w") as archive:
            archive.writestr(info, "x = 1\n")
        return data.getvalue()

    assert zip_problem(zip_with("../../evil.py")) == (
        "a zip archive whose member 'k3/ok.py' is named '../../evil.py' in its Unicode Path "
        "field (unzip writes that name)"
    )
    assert zip_problem(zip_with("k3/ok.py")) is None
