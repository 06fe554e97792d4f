"""release.project.cmakelists: a CMakeLists.txt's CUDA, architectures and flags, read
without CMake."""

from __future__ import annotations

import tracemalloc

import pytest

from release.project import read_cmakelists
from release.project.cmakelists import commands

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.26)
# project(commented LANGUAGES CUDA)
project(sgl_like
        LANGUAGES CXX CUDA)
#[[ a bracket comment
set(CMAKE_CUDA_ARCHITECTURES 60)
]]
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real;100-virtual")
endif()
set(CMAKE_CUDA_ARCHITECTURES 75 86 CACHE STRING "the default")
set(CMAKE_CUDA_ARCHITECTURES 89)
list(APPEND FLAGS "-gencode=arch=compute_90a,code=sm_90a"
     -gencode arch=compute_100,code=[sm_100,compute_100])
set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "80")
"""


def test_commands_span_lines_and_comments_are_dropped() -> None:
    found = commands(CMAKELISTS)
    assert [(c.name, c.line) for c in found[:3]] == [
        ("cmake_minimum_required", 1),
        ("project", 3),
        ("if", 8),
    ]
    assert found[1].arguments == ("sgl_like", "LANGUAGES", "CXX", "CUDA")
    assert all("60" not in c.arguments for c in found)


def test_cuda_architectures_defaults_overrides_and_flags() -> None:
    read = read_cmakelists(CMAKELISTS)
    assert str(read.cuda) == "CMakeLists.txt:3"
    assert [(s.place.line, s.entries, s.overrides) for s in read.architectures] == [
        (9, ("80-real", "90a-real", "100-virtual"), False),  # guarded: a default
        (11, ("75", "86"), False),  # a cache entry: -D wins
        (12, ("89",), True),  # a plain set: replaces what the build passes
    ]
    assert [p.line for p in read.target_architectures] == [15]
    assert [(g.place.line, g.cubins, g.ptx) for g in read.gencode] == [
        (13, ("90a",), ()),
        (13, ("100",), ("100",)),
    ]
    assert read_cmakelists("project(x LANGUAGES CXX)\n").cuda is None
    assert str(read_cmakelists("project(x)\nenable_language(CUDA)\n").cuda) == "CMakeLists.txt:2"


IDE_ONLY = """\
# NOTES: current just for CMake-based IDE (e.g. CLion) indexing, the real compilation is done
cmake_minimum_required(VERSION 3.10)
project(deep_gemm LANGUAGES CXX CUDA)
target_link_libraries(_C PRIVATE ${TORCH_LIBRARIES} CUDA::nvrtc CUDA::cublasLt torch_python)
"""


def test_a_cmakelists_that_says_it_is_for_an_ide_is_told_apart() -> None:
    read = read_cmakelists(IDE_ONLY)
    assert read.cuda is not None
    assert read.ide_only is not None
    assert str(read.ide_only.place) == "CMakeLists.txt:1"
    assert read.ide_only.value is not None
    assert read.ide_only.value.startswith("NOTES: current just for CMake-based IDE")
    assert [(str(s.place), s.value) for s in read.cuda_libraries] == [
        ("CMakeLists.txt:4", "CUDA::nvrtc"),
        ("CMakeLists.txt:4", "CUDA::cublasLt"),
    ]
    for comment in ("# Used by clangd only", "# not for building: see setup.py"):
        assert read_cmakelists(f"{comment}\nproject(x CUDA)\n").ide_only is not None
    # a build's own CMakeLists.txt, and a later comment, say nothing of the kind
    assert read_cmakelists(CMAKELISTS).ide_only is None
    assert read_cmakelists("project(x CUDA)\n# for the IDE\n").ide_only is None
    assert read_cmakelists("# builds the index kernels\nproject(x CUDA)\n").ide_only is None


def test_cuda_libraries_linked_by_their_own_name_are_read_as_written() -> None:
    """sgl-kernel links `${TORCH_LIBRARIES} c10 cuda cublas cublasLt` (-lcuda, -lcublas,
    -lcublasLt); torch's own and a project's targets are no CUDA library."""
    read = read_cmakelists(
        "project(k LANGUAGES CXX CUDA)\n"
        "target_link_libraries(common_ops_sm90_build PRIVATE ${TORCH_LIBRARIES} c10 cuda cublas"
        " cublasLt mscclpp_static)\n"
        "target_link_libraries(k PRIVATE CUDA::cuda_driver cudart_static)\n"
    )
    assert [(s.place.line, s.value) for s in read.cuda_libraries] == [
        (2, "cuda"), (2, "cublas"), (2, "cublasLt"), (3, "CUDA::cuda_driver"),
    ]  # fmt: skip


def test_a_quoted_argument_of_a_megabyte_costs_its_own_length() -> None:
    """P6-I6: matched a character at a time, the regular expression engine kept its state
    for each: a 25 MB `set(X "aaa...")` took 3.6 GB and 40 s."""
    text = f'project(x CUDA)\nset(X "{"a" * 2**20}")\nset(Y "b\\"" c) # "\nendif()\n'
    tracemalloc.start()
    try:
        found = commands(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(c.name, c.line) for c in found] == [
        ("project", 1),
        ("set", 2),
        ("set", 3),
        ("endif", 4),
    ]
    assert found[1].arguments == ("X", "a" * 2**20)
    assert found[2].arguments == ("Y", 'b\\"', "c")
    assert peak < 4 * 2**20


@pytest.mark.timeout(20)  # quadratic: each set searched every open if again
def test_the_ifs_that_guard_a_set_are_counted_not_searched_again() -> None:
    """P6-I6: 20,000 nested ifs and as many sets took minutes; a guard is still a guard."""
    guard = "if(A)\n" * 20_000 + "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n"  # innermost
    sets, ends = "set(CMAKE_CUDA_ARCHITECTURES 80)\n" * 20_000, "endif()\n" * 20_001
    text = f"{guard}{sets}{ends}set(CMAKE_CUDA_ARCHITECTURES 90)\n"
    found = read_cmakelists(text).architectures
    assert len(found) == 20_001
    assert not any(s.overrides for s in found[:-1])
    assert found[-1].overrides
    assert found[-1].place.line == 60_003
