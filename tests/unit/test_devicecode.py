"""Device code in every member of a wheel: fatbin files and shared objects with a
.nv_fatbin section (a real one built by nvcc), held to the cell's SMs and PTX."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path

from release.inspection.devicecode import (
    NO_DEVICE_CODE,
    MemberDeviceCode,
    coverage_problems,
    device_sections,
    found_targets,
    host_only_problems,
    parse_fatbin_headers,
    scan,
)
from release.inspection.fatbin import FatbinContents, parse_cuobjdump_listing
from release.targets import GpuTarget

DATA = Path(__file__).parent.parent / "data"
DEVICE_SO = DATA / "elf-device" / "x86_64-nv_fatbin.so"
HOST_SO = DATA / "elf" / "x86_64-glibc2.28.so"
CUBIN = DATA / "elf-device" / "tiny-sm_90.cubin"
SHIPPED = [GpuTarget.parse(s) for s in (75, 80, 86, 89, 90, 100)]
FULL = FatbinContents(sms=("75", "80", "86", "89", "90", "100"), ptx=("100",))


def wheel(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_a_shared_object_with_device_code_has_a_nv_fatbin_section() -> None:
    assert device_sections(DEVICE_SO.read_bytes()) == (".nv_fatbin",)
    assert device_sections(HOST_SO.read_bytes()) == ()
    assert device_sections(b"not an ELF file") == ()


def test_fatbin_headers_keep_the_family_suffix_that_list_elf_drops() -> None:
    headers = (DATA / "elf-device" / "x86_64-nv_fatbin.cuobjdump.txt").read_text()
    assert parse_fatbin_headers(headers) == FatbinContents(sms=("75", "90a", "100f"), ptx=("100",))
    listing = (DATA / "elf-device" / "x86_64-nv_fatbin.list-elf.txt").read_text()
    assert parse_cuobjdump_listing(listing).sms == ("75", "90a", "100")
    assert parse_fatbin_headers("") == FatbinContents(sms=(), ptx=())


def test_scan_lists_fatbins_and_shared_objects_with_device_code_only() -> None:
    data = wheel(
        {
            "pkg/__init__.py": b"",
            "pkg/device/a.fatbin": b"\x50\xed\x55\xba",
            "pkg/libhost.so": HOST_SO.read_bytes(),
            "pkg/_ops.abi3.so": DEVICE_SO.read_bytes(),
            "pkg/libx.so.1": DEVICE_SO.read_bytes(),
        }
    )
    elf_calls: list[str] = []

    def list_elf(name: str, member: Path) -> FatbinContents:
        assert member.read_bytes().startswith(b"\x7fELF")
        elf_calls.append(name)
        return FULL

    members = scan(data, list_fatbin=lambda name, member: FULL, list_elf=list_elf)
    assert [(m.name, m.kind) for m in members] == [
        ("pkg/device/a.fatbin", "fatbin"),
        ("pkg/_ops.abi3.so", "shared object"),
        ("pkg/libx.so.1", "shared object"),
    ]
    assert elf_calls == ["pkg/_ops.abi3.so", "pkg/libx.so.1"], "the host library is not listed"
    assert found_targets(members) == (FULL.sms, FULL.ptx)


def test_scan_streams_each_member_to_its_lister_never_holding_it_whole() -> None:
    # a served fatbin that inflated to 1 GiB was read whole into memory (2 GB peak)
    size = 64 * 2**20
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("pkg/kernels.fatbin", "w", force_zip64=True) as member,
    ):
        member.write(b"\x50\xed\x55\xba")
        for _ in range(size // 2**20):
            member.write(bytes(2**20))
    listed: list[int] = []

    def list_fatbin(name: str, path: Path) -> FatbinContents:
        listed.append(path.stat().st_size)
        return FULL

    tracemalloc.start()
    try:
        members = scan(buffer.getvalue(), list_fatbin=list_fatbin, list_elf=list_fatbin)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [m.name for m in members] == ["pkg/kernels.fatbin"]
    assert listed == [size + 4]
    assert peak < 8 * 2**20, f"scan held {peak} bytes of a {size}-byte member at once"


def member(contents: FatbinContents, name: str = "pkg/libfxk.so") -> MemberDeviceCode:
    return MemberDeviceCode(name=name, kind="shared object", contents=contents)


def test_the_exact_sms_and_ptx_pass() -> None:
    assert coverage_problems([member(FULL)], SHIPPED, GpuTarget(100)) == []


def test_only_the_first_sm_is_the_skbuild_cmake_args_trap() -> None:
    """SKBUILD_CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=75-real;80-real;..." is split on ';':
    CMake gets 75-real alone and the build succeeds."""
    problems = coverage_problems(
        [member(FatbinContents(sms=("75",), ptx=()))], SHIPPED, GpuTarget(100)
    )
    assert [p.split(":")[0] for p in problems] == [
        f"pkg/libfxk.so has no cubin for sm_{sm}" for sm in ("80", "86", "89", "90", "100")
    ] + ["pkg/libfxk.so has PTX none, the cell asks for compute_100"]


def test_extra_sms_suffixes_and_errors_are_reported_per_member() -> None:
    cell = [GpuTarget.parse("90a"), GpuTarget.parse("100f")]
    problems = coverage_problems(
        [
            member(FatbinContents(sms=("90a", "100f"), ptx=())),
            member(FatbinContents(sms=("90", "100f", "120"), ptx=()), "pkg/b.so"),
            member(FatbinContents(sms=(), ptx=(), error="cuobjdump cannot read it: x"), "c.so"),
        ],
        cell,
        None,
    )
    assert problems == [
        "pkg/b.so has no cubin for sm_90a: GPUs of that kind would fail with 'no kernel image "
        "is available for execution on the device'",
        "pkg/b.so has a cubin for sm_90, which the cell did not ask for",
        "pkg/b.so has a cubin for sm_120, which the cell did not ask for",
        "c.so: cuobjdump cannot read it: x",
    ]


def test_no_device_code_anywhere_fails() -> None:
    assert coverage_problems([], SHIPPED, GpuTarget(100)) == [NO_DEVICE_CODE]


def test_ptx_of_another_target_fails() -> None:
    problems = coverage_problems(
        [member(FatbinContents(sms=FULL.sms, ptx=("90",)))], SHIPPED, GpuTarget(100)
    )
    assert problems == ["pkg/libfxk.so has PTX compute_90, the cell asks for compute_100"]


def test_a_wheel_declared_without_device_code_holds_none_of_any_kind() -> None:
    host = HOST_SO.read_bytes()
    assert host_only_problems(wheel({"pkg/_C.so": host, "pkg/include/k.cuh": b"__global__"})) == []
    found = host_only_problems(
        wheel(
            {
                "pkg/_C.so": host,
                "pkg/libops.so.1": DEVICE_SO.read_bytes(),
                "pkg/kernels/k.cubin": b"",
                "pkg/kernels/tiny.bin": CUBIN.read_bytes(),
                "pkg/kernels/k.ptx": b".version 9.0\n.target sm_90\n",
                "pkg/kernels/all.dat": b"\x50\xed\x55\xba\x01\x00",
                "pkg/kernels/k.fatbin": b"",
            }
        )
    )
    assert [line.split(", and the cell")[0] for line in found] == [
        "pkg/libops.so.1 holds device code in its .nv_fatbin section",
        "pkg/kernels/k.cubin holds a cubin file",
        "pkg/kernels/tiny.bin holds a cubin",
        "pkg/kernels/k.ptx holds a ptx file",
        "pkg/kernels/all.dat holds a fatbin",
        "pkg/kernels/k.fatbin holds a fatbin file",
    ]
    assert found[0].endswith(
        ", and the cell declares device-code: none (the build compiled CUDA kernels into the "
        "wheel: list the SMs it builds under sms instead, or leave the kernels out of the build)"
    )


def test_no_device_code_names_both_causes_with_a_remedy_each() -> None:
    (problem,) = coverage_problems([], SHIPPED, GpuTarget(100))
    assert "Either the build skipped CUDA" in problem
    assert "set the project's force-CUDA switch in the matrix's build.env" in problem
    assert "compiles its kernels at run time and carries no device code" in problem
    assert problem.endswith("declare device-code: none for the cell in matrix.yaml")
