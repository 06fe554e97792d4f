"""release.project.native: what a setup.py and a staging script say of the native code they
build (translation units, libraries, C++ standard, package data, imports), and which line
of a translation unit binds it to Python; read without running anything."""

from __future__ import annotations

import pytest

from release.project.native import (
    merged,
    native_of_script,
    native_of_setup_py,
    python_binding,
)

SETUP = """\
import os
import setuptools

current_dir = os.path.dirname(os.path.realpath(__file__))


def build_module(output):
    import tvm_ffi.cpp
    from torch.utils import cpp_extension
    flags = ['-std=c++17', '-O3']
    ldflags = ['-lcudart', '-lnvrtc', '-lcublasLt', '-ltorch']
    tvm_ffi.cpp.build(
        name='_C',
        cpp_files=[os.path.join(current_dir, 'csrc', 'api.cpp'), 'csrc/extra.cc', 'csrc/*.cu'],
        extra_cflags=flags,
        extra_ldflags=ldflags,
    )


setuptools.setup(
    name='deep_gemm',
    package_data={'deep_gemm': ['include/deep_gemm/**/*'], 'deep_gemm.jit': ['*.cuh']},
    libraries=['cusparse'],
    install_requires=['apache-tvm-ffi==0.1.9'],
)
"""

SCRIPT = """\
#!/usr/bin/env bash
# compiles csrc/ignored.cpp with -lignored
"$PYTHON_EXE" -u - <<'PY'
import os, sys
import torch
from tvm_ffi import cpp
extra_cflags = ['-std=gnu++1z', '-O3']
extra_ldflags = ['-lcudart', '-lnvrtc', '-lcublas']
lib = tvm_ffi.cpp.build(cpp_files=[os.path.join(root_dir, 'csrc', 'tvm_ffi_api.cpp')])
PY
"""


def test_a_setup_py_names_its_units_libraries_standard_data_and_imports() -> None:
    read = native_of_setup_py(SETUP)
    # a glob is not a name; os.path.join's computed base is the project's directory
    assert [(str(u.place), u.value) for u in read.units] == [
        ("setup.py:14", "csrc/api.cpp"),
        ("setup.py:14", "csrc/extra.cc"),
    ]
    assert [lib.value for lib in read.libraries] == [
        "cudart",
        "nvrtc",
        "cublasLt",
        "torch",
        "cusparse",
    ]
    assert read.standard is not None
    assert (str(read.standard.place), read.standard.value, read.standard.expression) == (
        "setup.py:10",
        "17",
        "-std=c++17",
    )
    assert [d.value for d in read.package_data] == [
        "deep_gemm/include/deep_gemm/**/*",
        "deep_gemm/jit/*.cuh",
    ]
    assert [i.value for i in read.imports] == ["os", "setuptools", "tvm_ffi", "torch"]
    assert [r.value for r in read.requirements] == ["apache-tvm-ffi==0.1.9"]
    assert [lib.value for lib in read.linked({"nvrtc", "cusparse", "cufft"})] == [
        "nvrtc",
        "cusparse",
    ]


NAMED = """\
import os
from setuptools import setup
build_libraries = ['cudart', 'nvrtc']
base_requires: list[str] = ['apache-tvm-ffi==0.1.9']
if os.getenv('WITH_BLAS'):
    build_libraries.append('cublas')
    build_libraries += ['cublasLt']
data = ('include/**/*',)
setup(
    libraries=build_libraries,
    install_requires=base_requires + ['numpy'],
    package_data={'pkg': [*data, '*.cuh']},
)
"""


def test_a_keyword_naming_a_module_level_list_reads_what_the_list_holds() -> None:
    # `libraries=build_libraries` (DeepGEMM's setup.py): each string where it is written,
    # what a branch adds to the list included
    read = native_of_setup_py(NAMED)
    assert [(lib.value, lib.place.line) for lib in read.libraries] == [
        ("cudart", 3), ("nvrtc", 3), ("cublas", 6), ("cublasLt", 7)
    ]  # fmt: skip
    assert [(r.value, r.place.line) for r in read.requirements] == [
        ("apache-tvm-ffi==0.1.9", 4), ("numpy", 11)
    ]  # fmt: skip
    assert [d.value for d in read.package_data] == ["pkg/include/**/*", "pkg/*.cuh"]


def test_a_list_added_to_itself_is_read_in_bounded_time() -> None:
    doubled = "a = ['-lcudart']\n" + "a += a\n" * 40 + "setup(libraries=a + a)\n"
    read = native_of_setup_py(doubled)
    assert 1 <= len(read.libraries) <= 2 * 1000 + 40
    assert read.linked({"cudart"})[0].place.line == 1


def test_a_staging_scripts_quoted_strings_and_heredoc_imports_are_read() -> None:
    read = native_of_script(SCRIPT, "build_x.sh")
    assert [(str(u.place), u.value) for u in read.units] == [
        ("build_x.sh:9", "csrc/tvm_ffi_api.cpp")
    ]
    assert [lib.value for lib in read.libraries] == ["cudart", "nvrtc", "cublas"]
    assert read.standard is not None
    assert read.standard.value == "17"
    assert [(i.value, i.place.line) for i in read.imports] == [
        ("os", 4), ("sys", 4), ("torch", 5), ("tvm_ffi", 6)
    ]  # fmt: skip
    both = merged([native_of_setup_py(SETUP), read])
    assert [u.value for u in both.units] == [
        "csrc/api.cpp",
        "csrc/extra.cc",
        "csrc/tvm_ffi_api.cpp",
    ]


def test_the_lowest_standard_of_the_flags_is_the_projects() -> None:
    read = native_of_setup_py('F = ["-std=c++20"]\nG = ["-std=c++17"]\nH = ["-std=c++2a"]\n')
    assert read.standard is not None
    assert (read.standard.value, read.standard.place.line) == ("17", 2)
    assert native_of_setup_py("setup(\n").standard is None  # does not parse: says nothing


@pytest.mark.parametrize(
    ("line", "marker"),
    [
        ("#include <Python.h>", "Python.h"),
        ('#include "pybind11/pybind11.h"', "pybind11/pybind11.h"),
        ("#include <torch/extension.h>", "torch/extension.h"),
        ("#include <torch/python.h>", "torch/python.h"),
        ("#include <nanobind/nanobind.h>", "nanobind/nanobind.h"),
        ("PYBIND11_MODULE(_C, m) {", "PYBIND11_MODULE"),
        ("NB_MODULE(_C, m) {", "NB_MODULE"),
        ("PyMODINIT_FUNC PyInit__C(void) {", "PyInit__C"),
        ("TORCH_LIBRARY(k3, m) {", "TORCH_LIBRARY"),
        ("TORCH_LIBRARY_IMPL(k3, CUDA, m) {", "TORCH_LIBRARY_IMPL"),
    ],
)
def test_a_unit_that_binds_to_python_says_where(line: str, marker: str) -> None:
    found = python_binding(f"#include <cstdint>\n{line}\n", "csrc/api.cpp")
    assert found is not None
    assert (str(found.place), found.value) == ("csrc/api.cpp:2", marker)


def test_a_tvm_ffi_unit_binds_to_no_python() -> None:
    unit = (
        "#include <tvm/ffi/function.h>\n#include <torch/torch.h>\n"
        "// once bound with PYBIND11_MODULE(_C, m)\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(init, dg_init);\n"
    )
    assert python_binding(unit, "csrc/tvm_ffi_api.cpp") is None


def test_a_source_an_f_string_names_is_computed_not_a_unit() -> None:
    read = native_of_setup_py('abi = "stable"\nsources = [f"csrc/{abi}/ops.cpp", "csrc/x.cpp"]\n')
    assert [u.value for u in read.units] == ["csrc/x.cpp"]
    assert [(str(c.place), c.expression) for c in read.computed_units] == [
        ("setup.py:2", "f'csrc/{abi}/ops.cpp'")
    ]
    script = native_of_script('nvcc "$SRC/kernel.cu" "csrc/${NAME}.cpp"\n', "b.sh")
    assert script.units == ()
    assert len(script.computed_units) == 2
