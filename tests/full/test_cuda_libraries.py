"""The CUDA_HOME of a cell's CUDA libraries (build.cuda-libraries), provisioned from PyPI for
CUDA 13.0 (beside PyPI's nvcc) and for CUDA 12.9 (no nvcc on PyPI: a cell that compiles no
device code gets the headers and libraries alone): a host-only C++ file that includes
<nvrtc.h>, <cublas_v2.h> and <cublasLt.h> compiles against it, links -lnvrtc -lcublas
-lcublasLt -lcudart through their unversioned link names, and runs, reporting the NVRTC of
the cell's CUDA version. The 12.9 CUDA_HOME's nvcc says why it cannot compile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from release.toolchain import host_machine, provision, resolve
from release.toolchain.buildenv import cuda_home_of
from release.toolchain.cacheroot import toolchain_cache

pytestmark = pytest.mark.slow

PROBE = """\
#include <cstdio>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

int main() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 1;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);  // needs no GPU
  std::printf("nvrtc %d.%d cublasLt %zu cudart %d %p\\n", major, minor, cublasLtGetVersion(),
              runtime, (void*)&cublasCreate_v2);
  return 0;
}
"""


def needed(binary: Path) -> list[str]:
    with binary.open("rb") as stream:
        dynamic = ELFFile(stream).get_section_by_name(".dynamic")
        assert isinstance(dynamic, DynamicSection)
        tags = dynamic.iter_tags("DT_NEEDED")
        return [str(tag.needed) for tag in tags]  # type: ignore[attr-defined]  # set per tag


@pytest.mark.parametrize("cuda", ["13.0", "12.9"])
def test_a_host_only_file_links_the_cuda_libraries_of_the_cuda_home(
    cuda: str, release_cache: Path, tmp_path: Path
) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ on this machine")
    plan = resolve(
        cuda, host_machine(), cuda_home=None, cache_dir=toolchain_cache(release_cache),
        cuda_libraries=("nvrtc", "cublas", "cublasLt"), builds_in_cuda_home=True,
    )  # fmt: skip
    home = cuda_home_of(provision(plan, env=dict(os.environ)))
    assert home is not None
    for link in ("libnvrtc.so", "libcublas.so", "libcublasLt.so", "libcudart.so"):
        assert (home / "lib64" / link).is_symlink(), link
    source = tmp_path / "probe.cpp"
    source.write_text(PROBE, encoding="utf-8")
    binary = tmp_path / "probe"
    compiled = subprocess.run(
        [cxx, "-std=c++17", f"-I{home}/include", str(source), f"-L{home}/lib64",
         "-Wl,--no-as-needed", "-lnvrtc", "-lcublasLt", "-lcublas", "-lcudart", "-o", str(binary)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    major = cuda.split(".", maxsplit=1)[0]
    assert {f"libnvrtc.so.{major}", f"libcublas.so.{major}", f"libcublasLt.so.{major}",
            f"libcudart.so.{major}"} <= set(needed(binary))  # fmt: skip
    ran = subprocess.run(
        [str(binary)], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "LD_LIBRARY_PATH": str(home / "lib64")},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(f"nvrtc {cuda} cublasLt {major}")
    nvcc = subprocess.run(
        [str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    if cuda == "13.0":
        assert nvcc.returncode == 0
        assert "release 13.0" in nvcc.stdout
    else:
        assert nvcc.returncode == 1  # asked its version, it answers on stdout
        assert nvcc.stdout.startswith("release: no nvcc: PyPI has no nvcc for CUDA 12.9")
