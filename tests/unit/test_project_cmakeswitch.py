"""release.project.cmakeswitch: the cache variable a CMakeLists.txt enables CUDA behind,
read with the rest of the file (release.project.cmakelists), never run."""

from __future__ import annotations

import pytest

from release.project.cmakelists import read_cmakelists
from release.project.cmakeswitch import CudaSwitch
from release.project.places import Place

# bitsandbytes' shape: a string cache entry, tested to set a variable the `if` around
# enable_language(CUDA) tests
BACKEND = """\
project(k LANGUAGES CXX)
set(COMPUTE_BACKEND "cpu" CACHE STRING "cpu, cuda, hip")
if(${COMPUTE_BACKEND} STREQUAL "cuda")
    set(BUILD_CUDA ON)
elseif(${COMPUTE_BACKEND} STREQUAL "hip")
    set(BUILD_HIP ON)
endif()
if(BUILD_CUDA)
    if(MSVC)
        string(APPEND CMAKE_CUDA_FLAGS " --allow-unsupported-compiler")
    endif()
    enable_language(CUDA)
endif()
"""


def test_a_string_cache_entry_enables_cuda_through_a_variable_it_sets() -> None:
    assert read_cmakelists(BACKEND).cuda_switch == CudaSwitch(
        name="COMPUTE_BACKEND",
        value="cuda",
        default="cpu",
        declared=Place(file="CMakeLists.txt", line=2),
        via="BUILD_CUDA",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an option tested directly, off by default
        ('option(WITH_CUDA "CUDA kernels" OFF)\nif(WITH_CUDA)\n  enable_language(CUDA)\nendif()\n',
         ("WITH_CUDA", "ON", "OFF", None)),
        # an option without a default is off
        ('option(WITH_CUDA "CUDA kernels")\nif(${WITH_CUDA})\n  enable_language(CUDA)\nendif()\n',
         ("WITH_CUDA", "ON", "OFF", None)),
        # on by default: nothing to pass
        ('option(WITH_CUDA "CUDA kernels" ON)\nif(WITH_CUDA)\n  enable_language(CUDA)\nendif()\n',
         None),
        ('set(GPU cuda CACHE STRING "")\nif(GPU STREQUAL cuda)\n  enable_language(CUDA)\nendif()\n',
         None),
        # a default computed from another variable is not known here
        ('option(WITH_CUDA "x" ${CUDAToolkit_FOUND})\nif(WITH_CUDA)\n  enable_language(CUDA)\n'
         "endif()\n", None),
        # CUDA in an else() branch, outright, or behind a variable no cache entry decides
        ('option(CPU "x" OFF)\nif(CPU)\nelse()\n  enable_language(CUDA)\nendif()\n', None),
        ("project(k LANGUAGES CXX CUDA)\n", None),
        ("if(CMAKE_CUDA_COMPILER)\n  enable_language(CUDA)\nendif()\n", None),
    ],
)  # fmt: skip
def test_which_conditions_are_a_switch(
    text: str, expected: tuple[str, str, str, str | None] | None
) -> None:
    found = read_cmakelists(text).cuda_switch
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.name, found.value, found.default, found.via) == expected
        assert found.define == f"cmake.define.{found.name}"
