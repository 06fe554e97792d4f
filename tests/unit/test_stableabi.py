"""release.project.stableabi: a setup.py's TORCH_TARGET_VERSION, what it names, and which
compilers it reaches."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release.project.setuppy import read_setup_py
from release.project.stableabi import (
    StableAbi,
    stable_abi_note,
    stable_abi_warning,
    target_version,
)

ROOT = Path(__file__).resolve().parents[2]


def stable_abi_of(text: str) -> StableAbi | None:
    return read_setup_py(text).stable_abi


CXX_ONLY = """\
\"\"\"Builds with TORCH_TARGET_VERSION=... on (a docstring is not a define).\"\"\"
from torch.utils.cpp_extension import CUDAExtension
FLAGS = ["-O3", "-DTORCH_TARGET_VERSION=0x020a000000000000"]
setup(
    ext_modules=[
        CUDAExtension(
            "ops._C",
            ["ops.cpp", "ops.cu"],
            extra_compile_args={"cxx": FLAGS, "nvcc": ["-O3"]},
            py_limited_api=True,
        )
    ]
)
"""


def test_the_value_names_a_torch_release() -> None:
    assert target_version("0x020A000000000000") == Version("2.10")
    assert target_version("0x020B010000000000") == Version("2.11.1")


def test_a_define_on_the_cxx_flags_alone_is_found_and_warned_of() -> None:
    abi = stable_abi_of(CXX_ONLY)
    assert abi is not None
    assert (str(abi.place), abi.target, abi.reaches) == ("setup.py:3", Version("2.10"), ("cxx",))
    assert abi.requirement == "torch>=2.10"
    assert stable_abi_note(abi) == (
        "setup.py:3: libtorch's stable ABI, TORCH_TARGET_VERSION torch 2.10: one wheel a "
        "platform for every torch from it (its wheel requires torch>=2.10, "
        "or from the first torch of its cell's CUDA major on the torch index)"
    )
    warning = stable_abi_warning(abi)
    assert warning is not None
    assert warning.startswith(
        "setup.py:3: TORCH_TARGET_VERSION reaches the cxx compiler but not nvcc "
        '(extra_compile_args["nvcc"])'
    )


def test_a_define_on_both_or_in_define_macros_is_not_warned_of() -> None:
    both = CXX_ONLY.replace('"nvcc": ["-O3"]', '"nvcc": [*FLAGS, "-DUSE_CUDA"]')
    abi = stable_abi_of(both)
    assert abi is not None
    assert abi.reaches == ("cxx", "nvcc")
    assert stable_abi_warning(abi) is None
    # torchao's shape: each compiler's list spells the define anew
    anew = CXX_ONLY.replace(
        '"nvcc": ["-O3"]', '"nvcc": NVCC + ["-DTORCH_TARGET_VERSION=0x020a000000000000"]'
    )
    abi = stable_abi_of(anew)
    assert abi is not None
    assert (abi.target, abi.reaches) == (Version("2.10"), ("cxx", "nvcc"))
    macros = (
        'setup(ext_modules=[X("a", ["a.cu"], '
        'define_macros=[("TORCH_TARGET_VERSION", "0x020b000000000000")])])\n'
    )
    abi = stable_abi_of(macros)
    assert abi is not None
    assert (abi.target, abi.reaches) == (Version("2.11"), ("cxx", "nvcc"))


FIXTURE = (ROOT / "tests" / "fixtures" / "torch_ops" / "setup.py").read_text()
LITERAL = '"-DTORCH_TARGET_VERSION=0x020a000000000000"'


def test_the_fixtures_define_under_a_condition_is_said_so() -> None:
    abi = stable_abi_of(FIXTURE)
    assert abi is not None
    assert abi.target == Version("2.10")
    assert abi.reaches == ("cxx", "nvcc")  # through `defines`, and `nvcc` built from it
    assert abi.condition is not None
    assert 'if abi == "stable":' in FIXTURE.splitlines()[(abi.condition.line or 0) - 1]
    assert "torch 2.10 (where the condition at setup.py:" in stable_abi_note(abi)


def test_a_computed_define_is_said_so() -> None:
    assert LITERAL in FIXTURE
    computed = 'f"-DTORCH_TARGET_VERSION=0x{STABLE_TARGET[0]:02x}{STABLE_TARGET[1]:02x}" + 12 * "0"'
    abi = stable_abi_of(FIXTURE.replace(LITERAL, computed))
    assert abi is not None
    assert (abi.target, abi.reaches) == (None, ("cxx", "nvcc"))
    assert "a computed torch release (where the condition at setup.py:" in stable_abi_note(abi)


def test_no_define_or_no_python_is_none() -> None:
    assert stable_abi_of(CXX_ONLY.replace("-DTORCH_TARGET_VERSION", "-DOTHER")) is None
    assert stable_abi_of("def (:\n") is None


@pytest.mark.parametrize(
    "value",
    [
        "0020a000000000000",  # a leading 0 is octal to C, which has no 8 or 9: a traceback
        "0x1020a000000000000",  # more than 64 bits: it was read as 2.10
        "9" * 40,  # read as 185.245.96
        "f" * 5000,
    ],
)
def test_a_value_that_is_no_c_integer_of_64_bits_names_no_release(value: str) -> None:
    assert target_version(value) is None
    found = stable_abi_of(CXX_ONLY.replace("0x020a000000000000", value))
    assert found is not None
    assert found.target is None


def test_two_defines_of_other_values_name_no_target() -> None:
    """The compiler takes the last; the first was planned (2.10 for a 2.9 build)."""
    two = CXX_ONLY.replace('"-O3", ', '"-O3", "-DTORCH_TARGET_VERSION=0x0209000000000000", ')
    found = stable_abi_of(two)
    assert found is not None
    assert found.target is None
    same = CXX_ONLY.replace('"-O3", ', '"-O3", "-DTORCH_TARGET_VERSION=0x020a000000000000", ')
    assert (found := stable_abi_of(same)) is not None
    assert found.target == Version("2.10")
