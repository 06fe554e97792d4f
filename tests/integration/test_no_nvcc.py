"""bin/nvcc of a CUDA_HOME without nvcc (a 12.9 cell of device-code: none,
release/toolchain/cudahome.py), run: asked to compile, it says why it cannot on stderr, where
a build's log keeps it and release.building.diagnose finds it; asked `--version`, as CMake's
FindCUDAToolkit asks every nvcc it finds while configuring a project that compiles no CUDA,
it says so on stdout, which FindCUDAToolkit reads, so that the log of a build that fails
later for another reason does not read as a missing nvcc."""

from __future__ import annotations

import subprocess
from pathlib import Path

from release.building.diagnose import failure_cause
from release.toolchain.cudahome import NO_NVCC_LINE, assemble

LINE = NO_NVCC_LINE.format(cuda="12.9")


def home_without_nvcc(tmp_path: Path) -> Path:
    libraries = tmp_path / "cuda-12.9-libraries"
    (libraries / "nvidia" / "cuda_runtime" / "include").mkdir(parents=True)
    (libraries / "nvidia" / "cuda_runtime" / "lib").mkdir()
    (libraries / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12").write_bytes(b"")
    return assemble(tmp_path, cuda="12.9", toolkit=None, libraries=libraries, names=("cudart",))


def test_asked_to_compile_it_says_why_it_cannot_on_stderr(tmp_path: Path) -> None:
    nvcc = home_without_nvcc(tmp_path) / "bin" / "nvcc"
    done = subprocess.run(
        [str(nvcc), "-c", "kernel.cu", "-o", "kernel.o"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", LINE + "\n")
    assert failure_cause(["-- Configuring done", done.stderr]) == LINE.removeprefix("release: ")


def test_asked_its_version_it_says_so_on_stdout(tmp_path: Path) -> None:
    nvcc = home_without_nvcc(tmp_path) / "bin" / "nvcc"
    done = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (1, LINE + "\n", "")
