"""The manylinux verdict (release/inspection/verdict.py): auditwheel's policy on real ELF
files in a wheel, what its answer means for a cell, and the libraries it needs that nothing
provides (not the wheel, not the policy, not its runtime dependencies), each named."""

from __future__ import annotations

import zipfile
from pathlib import Path

from release.inspection.verdict import manylinux_verdict, verdict_problems
from release.wheelfile import record_hash

ELF = Path(__file__).resolve().parents[1] / "data" / "elf"


def wheel_of(directory: Path, library: str, arch: str, *, beside: str | None = None) -> Path:
    """A wheel whose one shared object is tests/data/elf/`library` (and, named `beside`, a
    copy of a glibc 2.28 library of the arch)."""
    path = directory / f"ext-0.1.0-py3-none-linux_{arch}.whl"
    info = "ext-0.1.0.dist-info"
    members = {
        "ext/_lib.so": (ELF / library).read_bytes(),
        **({f"ext/{beside}": (ELF / f"{arch}-glibc2.28.so").read_bytes()} if beside else {}),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: ext\nVersion: 0.1.0\n",
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_{arch}\n"
        ).encode(),
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_glibc_symbols_newer_than_the_manylinux_level(tmp_path: Path) -> None:
    wheel = wheel_of(tmp_path, "x86_64-glibc2.34.so", "x86_64")
    older = manylinux_verdict(wheel, manylinux="2_28", arch="x86_64")
    assert older.platform_tag == "manylinux_2_34_x86_64"
    assert older.problems == (
        "auditwheel: the wheel is only manylinux_2_34_x86_64, not manylinux_2_28_x86_64",
    )
    assert manylinux_verdict(wheel, manylinux="2_34", arch="x86_64").problems == ()


def test_a_glibc_228_library_of_either_machine_fits_its_own_arch(tmp_path: Path) -> None:
    for arch in ("x86_64", "aarch64"):
        wheel = wheel_of(tmp_path, f"{arch}-glibc2.28.so", arch)
        assert manylinux_verdict(wheel, manylinux="2_28", arch=arch).problems == ()
    aarch64 = wheel_of(tmp_path, "aarch64-glibc2.28.so", "aarch64")
    assert manylinux_verdict(aarch64, manylinux="2_28", arch="x86_64").problems == (
        "auditwheel: the wheel's libraries are aarch64, the cell is x86_64",
    )


def test_linking_a_cuda_library_is_refused_unless_it_is_provided(tmp_path: Path) -> None:
    wheel = wheel_of(tmp_path, "x86_64-needs-cudart.so", "x86_64")
    assert manylinux_verdict(wheel, manylinux="2_28", arch="x86_64").problems == (
        "ext/_lib.so needs libcudart.so.12, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches (none) "
        "(add the distribution that ships it to the project's dependencies, bundle it in the "
        "wheel, or link it statically)",
    )
    provided = manylinux_verdict(
        wheel, manylinux="2_28", arch="x86_64", provided={"libcudart.so.12"}
    )
    assert provided.external_libraries == ()
    assert provided.problems == ()


def test_each_library_nothing_provides_is_named_and_nothing_else(tmp_path: Path) -> None:
    """DeepGEMM's shape: torch's, CUDA's and apache-tvm-ffi's libraries come with the
    wheel's runtime dependencies; libnobody.so.1 with nothing."""
    wheel = wheel_of(tmp_path, "x86_64-needs-runtime-libs.so", "x86_64")
    alone = manylinux_verdict(wheel, manylinux="2_28", arch="x86_64")
    assert alone.platform_tag == "linux_x86_64"
    assert alone.external_libraries == (
        "libc10.so",
        "libnobody.so.1",
        "libnvrtc.so.13",
        "libtvm_ffi.so",
    )
    verdict = manylinux_verdict(
        wheel,
        manylinux="2_28",
        arch="x86_64",
        provided={"libc10.so", "libnvrtc.so.13", "libtvm_ffi.so", "libcudart.so.13"},
        dependencies=("torch", "apache-tvm-ffi", "cuda-toolkit", "nvidia-cuda-nvrtc"),
    )
    assert verdict.external_libraries == ("libnobody.so.1",)
    # the tag drops to linux_x86_64 for that library alone: no glibc problem is said
    assert verdict.problems == (
        "ext/_lib.so needs libnobody.so.1, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches (torch, "
        "apache-tvm-ffi, cuda-toolkit, nvidia-cuda-nvrtc) (add the distribution that ships "
        "it to the project's dependencies, bundle it in the wheel, or link it statically)",
    )


def test_a_library_the_wheel_holds_is_its_own(tmp_path: Path) -> None:
    wheel = wheel_of(tmp_path, "x86_64-needs-cudart.so", "x86_64", beside="libcudart.so.12")
    assert manylinux_verdict(wheel, manylinux="2_28", arch="x86_64").problems == ()


def test_a_wheel_at_or_below_the_cells_manylinux_passes() -> None:
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux_2_5_x86_64"):
        assert verdict_problems(tag, (), manylinux="2_28", arch="x86_64") == []


def test_a_wheel_above_the_cells_manylinux_is_refused() -> None:
    assert verdict_problems("manylinux_2_34_x86_64", (), manylinux="2_28", arch="x86_64") == [
        "auditwheel: the wheel is only manylinux_2_34_x86_64, not manylinux_2_28_x86_64"
    ]


def test_a_linux_wheel_is_refused_with_each_library_it_needs() -> None:
    found = verdict_problems(
        "linux_x86_64",
        ("libcuda.so.1", "libz.so.1"),
        manylinux="2_28",
        arch="x86_64",
        needed_by={"libz.so.1": "pkg/_C.so"},
        dependencies=[f"dist{n}" for n in range(8)],
    )
    assert found == [
        "auditwheel: the wheel is only linux_x86_64, not manylinux_2_28_x86_64",
        "the wheel needs libcuda.so.1, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches (dist0, "
        "dist1, dist2, dist3, dist4, dist5 and 2 more) (libcuda is the NVIDIA driver's: add "
        "cuda to build.cuda-libraries in matrix.yaml where the wheel may import only where a "
        'driver is installed, or load it at run time with dlopen("libcuda.so.1") or '
        "cudaGetDriverEntryPoint)",
        "pkg/_C.so needs libz.so.1, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches (dist0, "
        "dist1, dist2, dist3, dist4, dist5 and 2 more) (add the distribution that ships it "
        "to the project's dependencies, bundle it in the wheel, or link it statically)",
    ]


def test_a_wheel_of_another_arch_is_refused() -> None:
    assert verdict_problems("manylinux_2_28_aarch64", (), manylinux="2_28", arch="x86_64") == [
        "auditwheel: the wheel's libraries are aarch64, the cell is x86_64"
    ]
