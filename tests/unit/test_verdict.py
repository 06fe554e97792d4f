"""The manylinux verdict (release/inspection/verdict.py): auditwheel's policy on real ELF
files in a wheel, what its answer means for a cell, and which libraries count as torch's
(a torch cell's wheels may need them and never bundle them)."""

from __future__ import annotations

import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

from release.backends.torch_extension import TORCH_PROVIDED
from release.inspection.verdict import manylinux_verdict, verdict_problems
from release.wheelfile import record_hash

ELF = Path(__file__).resolve().parents[1] / "data" / "elf"


def wheel_of(directory: Path, library: str, arch: str) -> Path:
    """A wheel whose one shared object is tests/data/elf/`library`."""
    path = directory / f"ext-0.1.0-py3-none-linux_{arch}.whl"
    info = "ext-0.1.0.dist-info"
    members = {
        "ext/_lib.so": (ELF / library).read_bytes(),
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
        "auditwheel: the wheel is only linux_x86_64, not manylinux_2_28_x86_64",
        "auditwheel: the wheel needs shared libraries outside manylinux: libcudart.so.12",
    )
    provided = manylinux_verdict(wheel, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED)
    assert provided.external_libraries == ()


# the sonames of torch 2.14.1+cu130's torch/lib and of the nvidia/*/lib libraries an
# extension links (readelf -d ... | grep SONAME), and those of a cu12 torch
TORCH_SONAMES = (
    "libc10.so",
    "libc10_cuda.so",
    "libcaffe2_nvrtc.so",
    "libgomp.so.1",
    "libshm.so",
    "libtorch.so",
    "libtorch_cpu.so",
    "libtorch_cuda.so",
    "libtorch_cuda_linalg.so",
    "libtorch_global_deps.so",
    "libtorch_nvshmem.so",
    "libtorch_python.so",
    "libcublas.so.13",
    "libcublasLt.so.13",
    "libcudart.so.13",
    "libcufft.so.12",
    "libcufile.so.0",
    "libcupti.so.13",
    "libcurand.so.10",
    "libcusolver.so.12",
    "libcusparse.so.12",
    "libcusparseLt.so.0",
    "libnvJitLink.so.13",
    "libnvrtc.so.13",
    "libnvrtc-builtins.so.13.0",
    "libnvtx3interop.so.1",
    "libcudnn.so.9",
    "libcudnn_ops.so.9",
    "libnccl.so.2",
    "libnvshmem_host.so.3",
    "libcudart.so.12",
    "libnvToolsExt.so.1",
)
NOT_TORCHS = (
    "libcuda.so.1",  # the driver: the system's, not torch's
    "libplanted.so",
    "libz.so.1",
    "libopenblas.so.0",
    "libpython3.11.so.1.0",
    "libstdc++.so.6",
    "libomp.so",
    "libtorchvision.so",  # torchvision's and torchaudio's are not torch's
    "libtorchaudio.so",
)


@pytest.mark.parametrize("soname", TORCH_SONAMES)
def test_torchs_libraries_are_provided(soname: str) -> None:
    assert any(fnmatch(soname, pattern) for pattern in TORCH_PROVIDED)


@pytest.mark.parametrize("soname", NOT_TORCHS)
def test_other_libraries_are_not(soname: str) -> None:
    assert not any(fnmatch(soname, pattern) for pattern in TORCH_PROVIDED)


def test_a_wheel_at_or_below_the_cells_manylinux_passes() -> None:
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux_2_5_x86_64"):
        assert verdict_problems(tag, (), manylinux="2_28", arch="x86_64") == []


def test_a_wheel_above_the_cells_manylinux_is_refused() -> None:
    assert verdict_problems("manylinux_2_34_x86_64", (), manylinux="2_28", arch="x86_64") == [
        "auditwheel: the wheel is only manylinux_2_34_x86_64, not manylinux_2_28_x86_64"
    ]


def test_a_linux_wheel_is_refused_with_the_libraries_it_needs() -> None:
    found = verdict_problems(
        "linux_x86_64", ("libplanted.so", "libz.so.1"), manylinux="2_28", arch="x86_64"
    )
    assert found == [
        "auditwheel: the wheel is only linux_x86_64, not manylinux_2_28_x86_64",
        "auditwheel: the wheel needs shared libraries outside manylinux: libplanted.so, libz.so.1",
    ]


def test_a_wheel_of_another_arch_is_refused() -> None:
    assert verdict_problems("manylinux_2_28_aarch64", (), manylinux="2_28", arch="x86_64") == [
        "auditwheel: the wheel's libraries are aarch64, the cell is x86_64"
    ]
