"""A torch cell's CUDA_HOME nvcc (release.toolchain.torchenv's wrapper around PyPI's): the
same sources compiled in two checkouts give the same object bytes, where PyPI's nvcc alone
names a kernel in an anonymous namespace after the checkout's absolute path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release.toolchain import host_machine
from release.toolchain.plan import resolve
from release.toolchain.provision import provision
from release.toolchain.torchenv import assemble_cuda_home

pytestmark = pytest.mark.slow

KERNEL = """\
namespace {
__global__ void scale(float* x, float by) { x[threadIdx.x] *= by; }
}
void launch(float* x) { scale<<<1, 32>>>(x, 2.0f); }
"""


@pytest.fixture(scope="module")
def toolkit(release_cache: Path) -> Path:
    if host_machine() != "x86_64":
        pytest.skip("PyPI's nvcc is provisioned for x86_64 here")
    plan = resolve("13.0", "x86_64", cuda_home=None, cache_dir=release_cache)
    home = provision(plan, env=dict(os.environ)).cuda_home
    assert home is not None
    return home


@pytest.fixture(scope="module")
def cuda_home(toolkit: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torch-env")
    (root / "site").mkdir()  # no torch here: the wrapper does not need one
    return assemble_cuda_home(root / "cuda-home", toolkit, root / "site", "13.0")


def checkout(where: Path) -> Path:
    (where / "csrc").mkdir(parents=True)
    (where / "csrc" / "scale.cu").write_text(KERNEL, encoding="utf-8")
    (where / "other").mkdir()
    (where / "other" / "scale.cu").write_text(KERNEL, encoding="utf-8")
    return where


def compiled(nvcc: Path, project: Path, source: str) -> bytes:
    """One object, compiled as torch's ninja file does it: absolute paths, from the build
    directory, with the prefix map the torch backend gives the host compiler."""
    build = project / "build"
    build.mkdir(exist_ok=True)
    out = build / (source.replace("/", "_") + ".o")
    done = subprocess.run(
        [str(nvcc), "-c", str(project / source), "-o", str(out), "-O3",
         "-gencode=arch=compute_90,code=sm_90", f"-Xcompiler=-ffile-prefix-map={project}=."],
        cwd=build, capture_output=True, text=True, check=False,
        env={**os.environ, "RELEASE_NVCC_SOURCE_ROOT": str(project),
             "RELEASE_NVCC_PYTHON": sys.executable},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_bytes()


def kernel_names(data: bytes, tmp_path: Path) -> set[str]:
    obj = tmp_path / "names.o"
    obj.write_bytes(data)
    nm = shutil.which("nm")
    assert nm is not None, "binutils' nm is needed"
    listed = subprocess.run([nm, str(obj)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in listed.stdout.splitlines() if "GLOBAL__N" in line}


def test_the_same_source_in_two_checkouts_gives_the_same_object(
    cuda_home: Path, toolkit: Path, tmp_path: Path
) -> None:
    one = checkout(tmp_path / "one")
    two = checkout(tmp_path / "elsewhere" / "two")
    wrapped = cuda_home / "bin" / "nvcc"
    first = compiled(wrapped, one, "csrc/scale.cu")
    assert kernel_names(first, tmp_path)  # the kernel is in an anonymous namespace
    assert compiled(wrapped, two, "csrc/scale.cu") == first
    # nvcc alone names it after each checkout's path
    plain = toolkit / "bin" / "nvcc"
    assert kernel_names(compiled(plain, one, "csrc/scale.cu"), tmp_path) != kernel_names(
        compiled(plain, two, "csrc/scale.cu"), tmp_path
    )


def test_two_files_of_one_name_in_one_project_keep_their_kernels_apart(
    cuda_home: Path, tmp_path: Path
) -> None:
    project = checkout(tmp_path / "project")
    wrapped = cuda_home / "bin" / "nvcc"
    assert kernel_names(compiled(wrapped, project, "csrc/scale.cu"), tmp_path).isdisjoint(
        kernel_names(compiled(wrapped, project, "other/scale.cu"), tmp_path)
    )


def test_the_rest_of_nvccs_folder_is_there_and_the_wrapper_passes_other_calls_through(
    cuda_home: Path, toolkit: Path
) -> None:
    for entry in (toolkit / "bin").iterdir():
        assert (cuda_home / "bin" / entry.name).exists(), entry.name
    version = subprocess.run(
        [str(cuda_home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True
    )
    assert "release 13.0" in version.stdout
    assert shutil.which("nvcc", path=str(cuda_home / "bin")) == str(cuda_home / "bin" / "nvcc")
