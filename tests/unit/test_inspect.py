"""Wheel inspection: each check on wheels built in memory; ELF checks on real .so files."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from release.inspection.fatbin import FatbinContents, FatbinLister, summed_sizes, target_sizes
from release.inspection.wheel import budget_warning, check_elf, inspect_wheel
from release.matrix import Cell, load_matrix

DATA = Path(__file__).parent.parent / "data"
ELF = DATA / "elf"
CELLS = {c.id: c for c in load_matrix(DATA / "matrix" / "good" / "shipped-shape.yaml").cells}
FULL = FatbinContents(sms=("75", "80", "86", "89", "90", "100"), ptx=("100",))


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(
    cell: Cell,
    *,
    filename: str | None = None,
    version: str | None = None,
    tag: str | None = None,
    library: bytes | None = None,
    fatbins: int = 1,
    bad_record: bool = False,
    purelib: bool = False,
    info: str | None = None,
) -> tuple[str, bytes]:
    filename = filename or cell.wheel_filename
    version = version or str(cell.version)
    info = info or f"k3_kernels-{cell.version}.dist-info"
    files = {
        "k3_kernels/__init__.py": b"",
        "k3_kernels/libk3_host.so": library or (ELF / f"{cell.arch}-glibc2.28.so").read_bytes(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: k3-kernels\nVersion: {version}\n"
        ).encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: {str(purelib).lower()}\n"
            f"Tag: {tag or 'py3-none-' + cell.platform_tag}\n"
        ).encode(),
    }
    for index in range(fatbins):
        files[f"k3_kernels/device/kernel{index}.fatbin"] = b"\x50\xed\x55\xba" + bytes(index)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        lines = []
        for name, data in files.items():
            archive.writestr(name, data)
            lines.append(record_line(name, b"tampered" if bad_record and "init" in name else data))
        lines.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(lines) + "\n")
    return filename, buffer.getvalue()


def lister(contents: FatbinContents) -> FatbinLister:
    def list_fatbin(name: str, path: Path) -> FatbinContents:
        if not path.read_bytes().startswith(b"\x50\xed\x55\xba"):
            raise AssertionError(f"{name} is not the fatbin the test wrote")
        return contents

    return list_fatbin


def inspect(cell: Cell, contents: FatbinContents = FULL, **kwargs: Any) -> list[str]:
    name, data = make_wheel(cell, **kwargs)
    report = inspect_wheel(name, data, cell, list_fatbin=lister(contents))
    return list(report.problems)


@pytest.mark.parametrize("cell_id", sorted(CELLS))
def test_a_correct_wheel_passes(cell_id: str) -> None:
    cell = CELLS[cell_id]
    contents = FatbinContents(sms=tuple(str(s) for s in cell.sms), ptx=(str(cell.ptx),))
    assert inspect(cell, contents) == []


def test_a_missing_sm_is_the_no_kernel_image_bug() -> None:
    problems = inspect(CELLS["13.0-x86_64"], replace(FULL, sms=("75", "80", "86", "90", "100")))
    assert len(problems) == 1
    assert "no cubin for sm_89" in problems[0]
    assert "no kernel image is available" in problems[0]


def test_an_extra_sm_and_wrong_ptx_are_reported() -> None:
    problems = inspect(CELLS["13.0-x86_64"], FatbinContents(sms=(*FULL.sms, "120"), ptx=("90",)))
    assert any("cubin for sm_120, which the cell did not ask for" in p for p in problems)
    assert any("has PTX compute_90, the cell asks for compute_100" in p for p in problems)


def test_exclusion_is_respected_per_arch() -> None:
    cell = CELLS["12.9-aarch64"]
    assert "75" not in [str(s) for s in cell.sms]
    problems = inspect(cell, FULL)
    assert problems == [
        "k3_kernels/device/kernel0.fatbin has a cubin for sm_75, which the cell did not ask for"
    ]


def test_filename_and_metadata_version_must_agree() -> None:
    problems = inspect(CELLS["12.9-x86_64"], version="0.1.0")
    assert any("METADATA Version is '0.1.0', the filename says 0.1.0+cu129" in p for p in problems)


def test_local_label_must_be_the_cells() -> None:
    cell = CELLS["12.9-x86_64"]
    wrong = cell.wheel_filename.replace("+cu129", "+cu128")
    problems = inspect(cell, filename=wrong, version="0.1.0+cu128")
    assert any("the local label is 'cu128', the cell's is 'cu129'" in p for p in problems)


def test_wheel_tags_must_match_the_filename() -> None:
    problems = inspect(CELLS["13.0-x86_64"], tag="py3-none-linux_x86_64")
    assert any("WHEEL tags ['py3-none-linux_x86_64'] differ" in p for p in problems)
    assert any("Root-Is-Purelib" in p for p in inspect(CELLS["13.0-x86_64"], purelib=True))


@pytest.mark.parametrize("info", ["k3_kernels-0.1.x.dist-info", "k3_kernels.dist-info"])
def test_a_dist_info_folder_without_a_pep_440_version_is_not_the_wheels(info: str) -> None:
    cell = CELLS["13.0-x86_64"]
    assert inspect(cell, info=info) == [
        f"no k3-kernels-{cell.version}.dist-info directory in the wheel"
    ]


def test_a_wheel_tag_that_is_not_three_parts_is_a_problem() -> None:
    problems = inspect(CELLS["13.0-x86_64"], tag="py3-none")
    assert "WHEEL has the tag 'py3-none', not python-abi-platform" in problems


def test_a_wheel_that_is_not_a_zip_or_is_damaged_is_a_problem() -> None:
    cell = CELLS["13.0-x86_64"]
    report = inspect_wheel(cell.wheel_filename, b"host\n", cell, list_fatbin=lister(FULL))
    assert report.problems == ("the wheel is not a zip archive",)
    name, data = make_wheel(cell)
    member = data.index(b"\x50\xed\x55\xba")  # the fatbin's bytes, stored: its CRC breaks
    damaged = data[:member] + b"\x00" + data[member + 1 :]
    report = inspect_wheel(name, damaged, cell, list_fatbin=lister(FULL))
    assert report.problems == (
        "the wheel is a damaged zip archive (k3_kernels/device/kernel0.fatbin does not read back)",
    )


def test_record_hashes_are_checked() -> None:
    problems = inspect(CELLS["13.0-x86_64"], bad_record=True)
    assert problems == [
        "RECORD hash of k3_kernels/__init__.py is wrong",
        "RECORD size of k3_kernels/__init__.py is 8, the file has 0 bytes",
    ]


def test_elf_machine_must_match_the_platform() -> None:
    problems = inspect(CELLS["13.0-aarch64"], library=(ELF / "x86_64-glibc2.28.so").read_bytes())
    assert problems == [
        "k3_kernels/libk3_host.so is built for EM_X86_64, the wheel's platform is aarch64"
    ]


def test_a_wheel_without_fatbins_fails() -> None:
    assert any("no fatbin" in p for p in inspect(CELLS["13.0-x86_64"], fatbins=0))


def test_size_over_the_destination_limit() -> None:
    cell = CELLS["13.0-x86_64"]
    name, data = make_wheel(cell)
    report = inspect_wheel(name, data, cell, list_fatbin=lister(FULL), max_size=100)
    assert any("over pypi's limit" in p for p in report.problems)
    assert report.sha256 == hashlib.sha256(data).hexdigest()


SIZED = replace(
    FULL,
    sizes=(("sm_75", 3 << 20), ("sm_80", 1 << 20), ("sm_100", 5 << 20), ("ptx_100", 2 << 20)),
)


def test_device_bytes_per_target_are_summed_over_fatbins_and_name_the_heaviest() -> None:
    cell = CELLS["13.0-x86_64"]
    name, data = make_wheel(cell, fatbins=2)
    report = inspect_wheel(name, data, cell, list_fatbin=lister(SIZED), max_size=100)
    assert report.device_bytes == (
        ("sm_75", 6 << 20), ("sm_80", 2 << 20), ("sm_100", 10 << 20), ("ptx_100", 4 << 20),
    )  # fmt: skip
    (over,) = [p for p in report.problems if "over pypi's limit" in p]
    assert over.endswith("(heaviest device code: sm_100 10.0 MiB, sm_75 6.0 MiB, ptx_100 4.0 MiB)")


def test_a_wheel_near_its_file_limit_is_warned_of() -> None:
    cell = CELLS["13.0-x86_64"]
    name, data = make_wheel(cell)
    report = inspect_wheel(name, data, cell, list_fatbin=lister(SIZED))
    limit = cell.destination.max_file_size
    assert budget_warning(report, cell) is None  # a few KB of a 100 MiB limit
    near = replace(report, size=int(0.95 * limit))
    warned = budget_warning(near, cell)
    assert warned is not None
    assert "95% of pypi's 100 MiB file limit (heaviest device code: sm_100 5.0 MiB" in warned
    assert budget_warning(replace(report, size=limit + 1), cell) is None  # over: a problem


def test_extracted_files_give_bytes_per_target() -> None:
    files = {
        "swiglu.sm_90.cubin": 100, "swiglu.sm_90a.cubin": 7, "mla.sm_90.cubin": 50,
        "swiglu.sm_100.ptx": 30, "_C.abi3.1.sm_75.cubin": 9, "notes.txt": 1,
    }  # fmt: skip
    assert target_sizes(files) == (
        ("sm_75", 9), ("sm_90", 150), ("sm_90a", 7), ("ptx_100", 30),
    )  # fmt: skip
    assert summed_sizes([(("sm_90", 1), ("ptx_90", 2)), (("sm_90", 3),)]) == (
        ("sm_90", 4), ("ptx_90", 2),
    )  # fmt: skip


def test_a_library_of_another_machine_is_reported() -> None:
    data = (ELF / "aarch64-glibc2.28.so").read_bytes()
    assert check_elf("lib.so", data, arch="x86_64") == [
        "lib.so is built for EM_AARCH64, the wheel's platform is x86_64"
    ]
    assert check_elf("lib.so", data, arch="aarch64") == []


def test_a_non_elf_library_is_reported() -> None:
    assert "is not an ELF file" in check_elf("x.so", b"nope", arch="x86_64")[0]


def test_an_abi3_wheel_is_held_to_the_limited_api_of_its_floor() -> None:
    cell = replace(CELLS["13.0-x86_64"], abi3="3.10")
    name, data = make_wheel(cell, tag=f"cp310-abi3-{cell.platform_tag}")
    audited: list[tuple[str, int]] = []

    def audit(filename: str, wheel: bytes) -> list[str]:
        audited.append((filename, len(wheel)))
        return ["_C.abi3.so: PyUnicode_AsUTF8 joined the limited API in Python 3.13"]

    contents = FatbinContents(sms=tuple(str(s) for s in cell.sms), ptx=(str(cell.ptx),))
    report = inspect_wheel(name, data, cell, list_fatbin=lister(contents), audit_limited_api=audit)
    assert audited == [(name, len(data))]
    assert report.problems == (
        "abi3audit: _C.abi3.so: PyUnicode_AsUTF8 joined the limited API in Python 3.13",
    )
    # a wheel of a cell that is not abi3 is not audited
    plain = CELLS["13.0-x86_64"]
    name, data = make_wheel(plain)
    inspect_wheel(name, data, plain, list_fatbin=lister(contents), audit_limited_api=audit)
    assert len(audited) == 1


def test_the_build_holds_its_wheels_to_the_cells_cuda_major() -> None:
    """The same rule verify and audit apply to a served wheel (release.inspection.served)."""
    problems = inspect(CELLS["13.0-x86_64"], library=(ELF / "x86_64-needs-cudart.so").read_bytes())
    assert problems == ["k3_kernels/libk3_host.so needs libcudart.so.12; the cell is CUDA 13"]
