"""release.building.torchcell: the tag check (the build's interpreter and ABI tags against the
cell's, and a name that is not a wheel's said as such), and a JIT-first py3-none wheel's
torch checks on real ELF files: no device code asked for, the ABI check beside the torch's
libraries (stand-ins), the torch pin."""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from release.building.pipeline import retag_command
from release.building.settings import CellFailure
from release.building.torchcell import TorchBuildEnv, certify_torch, tags_problem
from release.inspection.runtimelibs import wheel_requirements
from release.matrix import load_matrix
from release.wheelfile import record_hash

DATA = Path(__file__).parent.parent / "data"
CELL = next(
    c
    for c in load_matrix(DATA / "matrix" / "good" / "shipped-shape.yaml").cells
    if c.id == "13.0-x86_64"
)


def test_the_cells_own_wheel_has_no_tag_problem() -> None:
    assert tags_problem(CELL.wheel_filename, CELL) is None


def test_another_interpreter_and_abi_is_named_with_the_remedy() -> None:
    name = CELL.wheel_filename.replace("-py3-none-", "-cp311-cp311-")
    assert tags_problem(name, CELL) == (
        "the build made a cp311-cp311 wheel, the cell is py3-none (not an abi3 build: list "
        "the Pythons to build it for under python:)"
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("hostname", "hostname: not a .whl file"),
        (
            "k3_kernels-0.1.x-py3-none-manylinux_2_28_x86_64.whl",
            "k3_kernels-0.1.x-py3-none-manylinux_2_28_x86_64.whl: not a valid wheel filename "
            "(invalid version)",
        ),
    ],
)
def test_a_name_that_is_not_a_wheels_is_a_problem_not_a_traceback(name: str, problem: str) -> None:
    assert tags_problem(name, CELL) == problem


JIT = load_matrix(DATA / "matrix" / "build" / "torch-jit.yaml").cells[0]


def test_a_python_any_torch_cell_expects_py3_none_and_says_how_to_get_it() -> None:
    assert JIT.wheel_filename == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert tags_problem(JIT.wheel_filename, JIT) is None
    assert (
        tags_problem(JIT.wheel_filename.replace("py3-none-manylinux", "py3-none-linux"), JIT)
        is None
    )
    # a project's own generic tag of no ABI (xformers' py39-none) is the cell's, retagged
    py39 = JIT.wheel_filename.replace("-py3-none-", "-py39-none-")
    assert tags_problem(py39, JIT) is None
    assert retag_command("python", Path(py39), JIT)[3:7] == [
        "tags",
        "--python-tag",
        "py3",
        "--platform-tag",
    ]
    assert "--python-tag" not in retag_command("python", Path(JIT.wheel_filename), JIT)
    assert tags_problem(JIT.wheel_filename.replace("-py3-none-", "-cp39-none-"), JIT) is not None
    cp311 = JIT.wheel_filename.replace("-py3-none-", "-cp311-cp311-")
    assert tags_problem(cp311, JIT) == (
        "the build made a cp311-cp311 wheel, the cell is py3-none (python: any expects one "
        "py3-none wheel of an extension that uses no Python C-API: make the project tag its "
        "wheel py3-none (its bdist_wheel's get_tag), or list the Pythons to build it for "
        "under python:)"
    )


def test_a_py3_none_build_for_a_cell_of_one_python_points_to_python_any() -> None:
    per_python = replace(JIT, python="3.11")
    assert tags_problem(JIT.wheel_filename, per_python) == (
        "the build made a py3-none wheel, the cell is cp311-cp311 (a build that uses no "
        "Python C-API: set python: any for it)"
    )


STAND_INS = DATA / "elf" / "stand-ins"


def jit_wheel(directory: Path) -> Path:
    """JIT's wheel as a JIT-first torch project builds it: one host-only _C.so that needs
    torch's, CUDA's and a runtime dependency's libraries, and no torch requirement."""
    info = "k3_kernels-0.1.0.dist-info"
    files = {
        "k3_kernels/_C.so": (DATA / "elf" / "x86_64-needs-runtime-libs.so").read_bytes(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: k3-kernels\nVersion: 0.1.0\n"
        b"Requires-Dist: apache-tvm-ffi==0.1.9\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-linux_x86_64\n",
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = directory / "k3_kernels-0.1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def torch_env(tmp_path: Path, libraries: list[str]) -> TorchBuildEnv:
    """A torch environment whose libraries are the stand-ins named."""
    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    for name in libraries:
        shutil.copyfile(STAND_INS / name, lib / name)
    return TorchBuildEnv(
        root=tmp_path,
        python=tmp_path / "bin" / "python",
        torch_version="2.14.1+cu130",
        torch_cuda="13.0",
        lib_dirs=(lib,),
        cuda_home=tmp_path / "cuda",
    )


def test_a_jit_first_py3_none_wheel_is_abi_checked_beside_its_torch_and_pinned(
    tmp_path: Path,
) -> None:
    log = tmp_path / "build.log"
    log.write_text("g++ -c csrc/api.cpp -std=c++20\n")
    everything = ["libc10.so", "libnvrtc.so.13", "libtvm_ffi.so", "libnobody.so.1"]
    wheel = jit_wheel(tmp_path)
    pinned = certify_torch(wheel, JIT, torch_env(tmp_path / "all", everything), log=log)
    assert wheel_requirements(pinned.read_bytes()) == ("apache-tvm-ffi==0.1.9", "torch==2.14.*")
    with pytest.raises(CellFailure) as failed:
        certify_torch(
            jit_wheel(tmp_path), JIT, torch_env(tmp_path / "less", everything[:3]), log=log
        )
    assert failed.value.error == (
        "ABI check: k3_kernels/_C.so: undefined symbol stand_in_libnobody_so_1: not exported "
        "by torch 2.14.1+cu130's libraries"
    )


def site_with_tvm_ffi(root: Path) -> Path:
    """A site-packages directory where pip installed apache-tvm-ffi (its libtvm_ffi.so the
    stand-in) and torch (its libraries in torch/lib), as a torch cell's build.requires does."""
    site = root / "site-packages"
    for name, files in (
        ("apache_tvm_ffi-0.1.9", {"tvm_ffi/lib/libtvm_ffi.so": "libtvm_ffi.so"}),
        (
            "torch-2.14.1",
            {"torch/lib/libc10.so": "libc10.so", "torch/lib/libnvrtc.so.13": "libnvrtc.so.13"},
        ),
    ):
        info = site / f"{name}.dist-info"
        info.mkdir(parents=True)
        project, version = name.split("-")
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {project.replace('_', '-')}\nVersion: {version}\n"
        )
        (info / "RECORD").write_text("".join(f"{path},,\n" for path in files))
        for path, stand_in in files.items():
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(STAND_INS / stand_in, site / path)
    return site


def test_what_a_runtime_dependency_installed_beside_torch_exports_resolves(
    tmp_path: Path,
) -> None:
    """libtvm_ffi.so lies in apache-tvm-ffi's own folder, not in torch's: the wheel, which
    requires apache-tvm-ffi, loads beside both."""
    log = tmp_path / "build.log"
    log.write_text("g++ -c csrc/jit_api.cpp -std=c++20\n")
    site = site_with_tvm_ffi(tmp_path)
    (site / "torch" / "lib" / "libnobody.so.1").write_bytes(
        (STAND_INS / "libnobody.so.1").read_bytes()
    )
    environment = replace(
        torch_env(tmp_path / "env", []), lib_dirs=(site / "torch" / "lib",), site_packages=site
    )
    pinned = certify_torch(jit_wheel(tmp_path), JIT, environment, log=log)
    assert wheel_requirements(pinned.read_bytes()) == ("apache-tvm-ffi==0.1.9", "torch==2.14.*")

    (site / "torch" / "lib" / "libnobody.so.1").unlink()
    with pytest.raises(CellFailure) as failed:
        certify_torch(jit_wheel(tmp_path), JIT, environment, log=log)
    assert failed.value.error == (
        "ABI check: k3_kernels/_C.so: undefined symbol stand_in_libnobody_so_1: not exported "
        "by torch 2.14.1+cu130's libraries nor by those of apache-tvm-ffi"
    )
