"""A torch cell's wheel gets its runtime dependencies' libraries from its build
environment (release/building/runtimedeps.py): the torch venv's installed distributions,
read without running anything (a unit test can start no process), and the verdict names
what none of them provides; and the pip command of an isolated build's scratch site."""

from __future__ import annotations

import zipfile
from pathlib import Path

from release.building.runtimedeps import (
    compatible_platforms,
    libraries_verdict,
    scratch_command,
)
from release.building.torchcell import TorchBuildEnv
from release.matrix import load_matrix
from release.wheelfile import record_hash

DATA = Path(__file__).resolve().parents[1] / "data"
JIT = load_matrix(DATA / "matrix" / "build" / "torch-jit.yaml").cells[0]
# name: (Requires-Dist, files), as pip installs them into the torch venv
SITE = {
    "torch": (
        ('cuda-toolkit[nvrtc]==13.0.3; platform_system == "Linux"',),
        ("torch/lib/libc10.so",),
    ),
    "cuda-toolkit": (('nvidia-cuda-nvrtc==13.0.88; extra == "nvrtc"',), ()),
    "nvidia-cuda-nvrtc": ((), ("nvidia/cu13/lib/libnvrtc.so.13",)),
    "apache-tvm-ffi": ((), ("tvm_ffi/lib/libtvm_ffi.so",)),
    "setuptools": ((), ()),
}


def site_packages(root: Path) -> Path:
    for name, (requires, files) in SITE.items():
        info = root / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir(parents=True)
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        (info / "METADATA").write_text(
            metadata + "".join(f"Requires-Dist: {r}\n" for r in requires)
        )
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
        for file in files:  # importlib_metadata lists only the files that are there
            (root / file).parent.mkdir(parents=True, exist_ok=True)
            (root / file).write_bytes(b"")
    return root


def wheel(directory: Path, requires: tuple[str, ...]) -> Path:
    info = "k3_kernels-0.1.0.dist-info"
    metadata = "Metadata-Version: 2.1\nName: k3-kernels\nVersion: 0.1.0\n"
    files = {
        "k3_kernels/_C.so": (DATA / "elf" / "x86_64-needs-runtime-libs.so").read_bytes(),
        f"{info}/METADATA": (
            metadata + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-linux_x86_64\n",
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = directory / "k3_kernels-0.1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_a_torch_cells_wheel_is_held_to_what_its_environment_provides(tmp_path: Path) -> None:
    environment = TorchBuildEnv(
        root=tmp_path,
        python=tmp_path / "bin" / "python",
        torch_version="2.14.1+cu130",
        torch_cuda="13.0",
        lib_dirs=(),
        cuda_home=tmp_path / "cuda",
        site_packages=site_packages(tmp_path / "site"),
    )
    verdict = libraries_verdict(
        wheel(tmp_path, ("apache-tvm-ffi==0.1.9", "torch==2.14.*")),
        JIT,
        environment=environment,
        scratch_root=None,
        python="python3",
        env={},
        log=tmp_path / "build.log",
    )
    assert verdict.external_libraries == ("libnobody.so.1",)
    (problem,) = verdict.problems
    assert problem.startswith(
        "k3_kernels/_C.so needs libnobody.so.1, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches "
        "(apache-tvm-ffi, torch, cuda-toolkit, nvidia-cuda-nvrtc) "
    )


def test_the_scratch_site_takes_binary_wheels_for_the_cells_platform_only(tmp_path: Path) -> None:
    # pip takes each --platform as it is (a manylinux_2_28 one does not take the
    # manylinux_2_17 or manylinux2010 wheels a user's pip installs there): every level
    # PEP 600 says the cell's runs, and the legacy names of the old ones
    older = [f"manylinux_2_{minor}_x86_64" for minor in range(27, 4, -1)]
    legacy = ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    platforms = [
        word for tag in ["manylinux_2_28_x86_64", *older, *legacy] for word in ("--platform", tag)
    ]
    assert scratch_command("python3", tmp_path, JIT.platform_tag, ["torch==2.14.*"]) == [
        "python3", "-m", "pip", "install", "--disable-pip-version-check", "--no-compile",
        "--only-binary", ":all:", *platforms,
        "--target", str(tmp_path), "torch==2.14.*",
    ]  # fmt: skip


def test_the_platforms_a_manylinux_tag_runs() -> None:
    assert compatible_platforms("manylinux_2_34_aarch64") == [
        *(f"manylinux_2_{minor}_aarch64" for minor in range(34, 16, -1)),
        "manylinux2014_aarch64",
    ]
    assert compatible_platforms("linux_x86_64") == ["linux_x86_64"]
