"""Why a PEP 517 build failed, in one line with its remedy (release.building.diagnose), read
from the logs of real failed builds (tests/data/buildlogs, README there says how each was
made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.building.diagnose import failure_cause, header_library

LOGS = Path(__file__).resolve().parents[1] / "data" / "buildlogs"


def cause(name: str) -> str:
    found = failure_cause((LOGS / name).read_text(encoding="utf-8").splitlines())
    assert found is not None
    assert "\n" not in found
    return found


def test_a_module_the_build_environment_lacks_is_named_with_build_requires() -> None:
    found = cause("deepgemm-no-tvm-ffi.log")
    assert found.startswith("No module named 'tvm_ffi' (")
    assert "add the distribution that provides tvm_ffi to build.requires in matrix.yaml" in found


def test_libraries_the_linker_cannot_find_are_named_with_build_cuda_libraries() -> None:
    found = cause("link-no-cuda-libraries.log")
    assert found.startswith("the linker cannot find -lnvrtc, -lcublasLt, -lcublas (")
    assert "add nvrtc, cublasLt, cublas to build.cuda-libraries in matrix.yaml" in found
    # not setuptools' own `error: command '/usr/bin/g++' failed`, which says nothing
    assert "command" not in found


def test_a_cuda_header_the_compiler_cannot_find_names_its_library() -> None:
    found = cause("no-nvrtc-header.log")
    assert found.startswith("ext.cpp: nvrtc.h: No such file or directory (")
    assert "add nvrtc to build.cuda-libraries" in found


def test_a_cxx_standard_older_than_torchs_headers_names_both_ways_out() -> None:
    """The log also misses cusparse.h further down: the first cause is the standard."""
    found = cause("torch-2.14-cxx17.log")
    assert found.startswith("C++20 or later compatible compiler is required to use PyTorch (")
    assert "pin a torch release before 2.14 in matrix.yaml's torch" in found
    assert "-std=c++20" in found


def test_otherwise_the_first_compiler_error() -> None:
    found = cause("compiler-error.log")
    # g++ quotes names with typographic quotes in a UTF-8 locale, as this log was made
    assert found == (
        "the first compiler error: ext.cpp:1:22: error: \u2018undeclared_thing\u2019 was not "
        "declared in this scope"
    )


def test_a_cu_file_compiled_without_nvcc_says_why_and_what_to_do() -> None:
    found = cause("no-nvcc.log")
    assert found.startswith("no nvcc: PyPI has no nvcc for CUDA 12.9")
    assert "device-code: none" in found
    assert "--cuda-home" in found


def test_a_log_with_no_known_cause_gives_none_and_the_last_exception_else() -> None:
    assert failure_cause(["* Building wheel...", "ERROR Backend subprocess exited"]) is None
    found = failure_cause(
        ["Traceback (most recent call last):", '  File "setup.py", line 40, in <module>',
         "AssertionError: Cannot find CUDA_HOME"]
    )  # fmt: skip
    assert found == "the build raised AssertionError: Cannot find CUDA_HOME"


def test_a_missing_torch_module_points_to_the_torch_backend() -> None:
    found = failure_cause(["ModuleNotFoundError: No module named 'torch'"])
    assert found is not None
    assert "build.backend: torch" in found


def test_cmake_errors_are_read_with_the_line_that_says_why() -> None:
    found = failure_cause(
        ["-- Configuring incomplete", "CMake Error at CMakeLists.txt:12 (find_package):",
         "  Could not find a package configuration file provided by \"Torch\""]
    )  # fmt: skip
    assert found == (
        "CMake Error at CMakeLists.txt:12 (find_package): Could not find a package "
        'configuration file provided by "Torch"'
    )


@pytest.mark.parametrize(
    ("header", "library"),
    [
        ("nvrtc.h", "nvrtc"),
        ("cublasLt.h", "cublasLt"),
        ("cublas_v2.h", "cublas"),
        ("cusolverDn.h", "cusolver"),
        ("cufftw.h", "cufftw"),
        ("curand_kernel.h", "curand"),
        ("nvJitLink.h", "nvJitLink"),
        ("cuda_runtime.h", "cudart"),
        ("cuda.h", "cudart"),
        ("thrust/sort.h", "cccl"),
        ("nv/target", "cccl"),
        ("torch/extension.h", None),
        ("Python.h", None),
    ],
)
def test_which_cuda_library_a_header_comes_with(header: str, library: str | None) -> None:
    assert header_library(header) == library


def test_the_drivers_library_the_linker_cannot_find_is_told_both_remedies() -> None:
    """SageAttention's `_qattn_sm90` links -lcuda, which only a driver or a toolkit's stubs
    hold: declare the stub (`cuda` in build.cuda-libraries), or load the driver at run
    time; never the remedy of a library PyPI's wheels carry."""
    found = cause("link-libcuda.log")
    assert found.startswith("the linker cannot find -lcuda (libcuda.so is the NVIDIA driver's")
    assert "add cuda to build.cuda-libraries in matrix.yaml for a link stub" in found
    assert 'dlopen("libcuda.so.1")' in found
    assert "has no link name for" not in found
