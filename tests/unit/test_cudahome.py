"""The CUDA_HOME of a cell's CUDA libraries (release.toolchain.cudahome): the unversioned link
name of each library, the trees it is made of, one for each toolkit and library set, and a
nvcc that says why it cannot compile where PyPI has none. Made of symlinks in a temporary
directory; nothing runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release.errors import ToolchainError
from release.toolchain.cudahome import (
    NO_NVCC_LINE,
    assemble,
    driver_stub_source,
    driver_symbols,
    home_name,
    link_names,
)


def test_the_link_name_points_at_the_shortest_versioned_name() -> None:
    files = [
        "libnvrtc.so.13",
        "libnvrtc.alt.so.13",
        "libnvrtc-builtins.so.13.0",
        "libcublasLt.so.13",
        "libcublas.so.13",
        "libcufft.so.12.0.0",
        "libcufft.so.12",
        "libcudart_static.a",
    ]
    links, missing = link_names(files, ["nvrtc", "cublas", "cublasLt", "cufft", "curand"])
    assert links == {
        "libnvrtc.so": "libnvrtc.so.13",
        "libcublas.so": "libcublas.so.13",
        "libcublasLt.so": "libcublasLt.so.13",
        "libcufft.so": "libcufft.so.12",
    }
    assert missing == ["curand"]


def test_each_toolkit_and_library_set_gets_a_cuda_home_of_its_own() -> None:
    libs = Path("/cache/cuda-13.0-libraries-x")
    one = home_name("13.0", Path("/cache/nvcc/nvidia/cu13"), libs, ["cudart", "nvrtc"])
    assert one == home_name("13.0", Path("/cache/nvcc/nvidia/cu13"), libs, ["nvrtc", "cudart"])
    assert one != home_name("13.0", Path("/cache/nvcc/nvidia/cu13"), libs, ["cudart"])
    assert one != home_name("13.0", None, libs, ["cudart", "nvrtc"])
    assert one.startswith("cuda-home-13.0-")


def wheel_tree(root: Path, tree: str, include: list[str], lib: list[str]) -> None:
    for name in include:
        (root / "nvidia" / tree / "include" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "nvidia" / tree / "include" / name).write_text(f"// {tree}\n")
    (root / "nvidia" / tree / "lib").mkdir(parents=True, exist_ok=True)
    for name in lib:
        (root / "nvidia" / tree / "lib" / name).write_bytes(tree.encode())


def test_a_cuda_home_without_nvcc_holds_the_cu12_trees_with_link_names(tmp_path: Path) -> None:
    libraries = tmp_path / "cuda-12.9-libraries"
    wheel_tree(libraries, "cuda_runtime", ["cuda_runtime.h"], ["libcudart.so.12"])
    wheel_tree(libraries, "cuda_nvcc", ["crt/host_config.h"], [])
    wheel_tree(libraries, "cuda_nvrtc", ["nvrtc.h"], ["libnvrtc.so.12", "libnvrtc.alt.so.12"])
    wheel_tree(libraries, "cublas", ["cublasLt.h"], ["libcublas.so.12", "libcublasLt.so.12"])
    home = assemble(
        tmp_path, cuda="12.9", toolkit=None, libraries=libraries,
        names=("cudart", "nvrtc", "cublas", "cublasLt"),
    )  # fmt: skip
    assert (home / "include" / "nvrtc.h").read_text() == "// cuda_nvrtc\n"
    assert (home / "include" / "crt" / "host_config.h").is_file()
    assert os.readlink(home / "lib" / "libnvrtc.so") == "libnvrtc.so.12"
    assert (home / "lib64" / "libcublasLt.so").read_bytes() == b"cublas"
    assert (home / "lib64" / "libcudart.so").read_bytes() == b"cuda_runtime"
    nvcc = home / "bin" / "nvcc"
    assert os.access(nvcc, os.X_OK)
    assert NO_NVCC_LINE.format(cuda="12.9") in nvcc.read_text().replace("'", "")
    assert "exit 1" in nvcc.read_text()
    # made once: asked again, the same tree comes back as it is
    assert assemble(
        tmp_path, cuda="12.9", toolkit=None, libraries=libraries,
        names=("cudart", "nvrtc", "cublas", "cublasLt"),
    ) == home  # fmt: skip


def test_the_toolkits_tree_comes_first_and_its_nvcc_is_linked(tmp_path: Path) -> None:
    toolkit = tmp_path / "nvcc" / "nvidia" / "cu13"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("real nvcc")
    (toolkit / "bin" / "nvcc.profile").write_text("TOP = $(_HERE_)/..")
    (toolkit / "nvvm").mkdir()
    (toolkit / "include").mkdir()
    (toolkit / "include" / "cuda_runtime.h").write_text("// toolkit\n")
    (toolkit / "lib").mkdir()
    (toolkit / "lib" / "libcudart.so.13").write_bytes(b"toolkit")
    libraries = tmp_path / "cuda-13.0-libraries"
    wheel_tree(
        libraries, "cu13", ["cuda_runtime.h", "nvrtc.h"], ["libcudart.so.13", "libnvrtc.so.13"]
    )
    home = assemble(
        tmp_path, cuda="13.0", toolkit=toolkit, libraries=libraries, names=("cudart", "nvrtc")
    )
    assert (home / "bin" / "nvcc").resolve() == toolkit / "bin" / "nvcc"
    assert (home / "bin" / "nvcc.profile").is_file()  # nvcc reached through its link finds it
    assert (home / "nvvm").resolve() == toolkit / "nvvm"
    assert (home / "include" / "cuda_runtime.h").read_text() == "// toolkit\n"
    assert (home / "include" / "nvrtc.h").read_text() == "// cu13\n"
    assert (home / "lib64" / "libcudart.so").read_bytes() == b"toolkit"
    assert (home / "lib64" / "libnvrtc.so").read_bytes() == b"cu13"


def test_a_library_the_wheels_lack_is_an_error_naming_it(tmp_path: Path) -> None:
    libraries = tmp_path / "libs"
    wheel_tree(libraries, "cu13", ["cuda_runtime.h"], ["libcudart.so.13"])
    with pytest.raises(ToolchainError) as caught:
        assemble(
            tmp_path, cuda="13.0", toolkit=None, libraries=libraries, names=("cudart", "nvrtc")
        )
    assert "no shared library of nvrtc" in caught.value.message
    assert not list(tmp_path.glob("cuda-home-*")), "nothing half-made is left under its name"


# lines as CUDA 13.0's cuda.h and cudaProfilerTypedefs.h write them
CUDA_H = (Path(__file__).resolve().parents[1] / "data" / "driver" / "cuda.h").read_text()
PROFILER_TYPEDEFS = "typedef CUresult (CUDAAPI *PFN_cuProfilerStart_v4000)(void);\n"


def test_the_driver_stub_defines_what_calls_through_cuda_h_compile_to() -> None:
    """A call to cuMemAlloc compiles to cuMemAlloc_v2, cuMemcpyHtoD to cuMemcpyHtoD_v2 (or
    its _ptds name where the build asks for per-thread streams): the stub defines those
    and the declared names; a name in a comment or a macro's parameter is none."""
    assert driver_symbols([CUDA_H, PROFILER_TYPEDEFS]) == [
        "cuInit", "cuMemAlloc", "cuMemAlloc_v2", "cuMemPrefetchBatchAsync",
        "cuMemPrefetchBatchAsync_ptsz", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds",
        "cuProfilerStart", "cuTensorMapEncodeTiled",
    ]  # fmt: skip
    source = driver_stub_source(["cuInit", "cuMemAlloc_v2"])
    assert "void cuInit(void) {}\nvoid cuMemAlloc_v2(void) {}\n" in source


def test_a_driver_stub_without_a_compiler_or_a_cuda_h_is_an_error(tmp_path: Path) -> None:
    libraries = tmp_path / "libs"
    wheel_tree(libraries, "cu13", ["cuda_runtime.h"], ["libcudart.so.13"])
    for compile_stub in (None, lambda arguments: None):
        with pytest.raises(ToolchainError) as caught:
            assemble(
                tmp_path, cuda="13.0", toolkit=None, libraries=libraries,
                names=("cudart", "cuda"), compile_stub=compile_stub, compiler="cc",
            )  # fmt: skip
        expected = "no C compiler" if compile_stub is None else "no cuda.h that declares"
        assert expected in caught.value.message
    assert not list(tmp_path.glob("cuda-home-*")), "nothing half-made is left under its name"
    assert home_name("13.0", None, libraries, ["cuda"], "zig cc -target a") != home_name(
        "13.0", None, libraries, ["cuda"], "zig cc -target b"
    )
