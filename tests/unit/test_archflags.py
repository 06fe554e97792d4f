"""release.backends.archflags: what a compile line asks nvcc for, against the cell's request.

The nvcc semantics here were read from nvcc 13.0's own `--dryrun` (the images it makes):
`-arch=sm_80` is a cubin and PTX, `-arch=compute_80` PTX alone, the last `-arch` wins,
`-gencode` and `-arch` add up, a line with no flag builds sm_75 and compute_75."""

from __future__ import annotations

import pytest

from release.backends.archflags import (
    ArchHints,
    ArchRequest,
    Stop,
    arch_flags,
    cell_request,
    compiled_source,
    from_cmake,
    literal_warning,
    matrix_targets,
    project_name,
    requested,
    stop_in_log,
    stop_message,
    stop_of,
    to_cmake,
)
from release.backends.cmake_project import cmake_architectures
from release.building.preview import literal_flags
from release.project.setuppy import read_setup_py
from release.targets import GpuTarget as T

HINTS = ArchHints(
    variable="TORCH_CUDA_ARCH_LIST",
    cause="CAUSE",
    honour="HONOUR",
    arch_file="setup.py",
    gencode_sits="instead of",
)


def request(cubins: list[str], ptx: list[str], unknown: tuple[str, ...] = ()) -> ArchRequest:
    return ArchRequest(
        cubins=frozenset(T.parse(c) for c in cubins),
        ptx=frozenset(T.parse(p) for p in ptx),
        unknown=unknown,
    )


def asked(line: str) -> ArchRequest | None:
    return requested(arch_flags(line.split()))


@pytest.mark.parametrize(
    ("line", "cubins", "ptx"),
    [
        # torch's own spelling, TORCH_CUDA_ARCH_LIST=8.0;9.0+PTX
        (
            "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=compute_90 "
            "-gencode=arch=compute_90,code=sm_90",
            ["80", "90"],
            ["90"],
        ),
        # CMake's, CMAKE_CUDA_ARCHITECTURES=75-real;100-virtual
        (
            "--generate-code=arch=compute_75,code=[sm_75] "
            "--generate-code=arch=compute_100,code=[compute_100]",
            ["75"],
            ["100"],
        ),
        ("-gencode arch=compute_80,code=[sm_80,compute_80]", ["80"], ["80"]),
        ("--generate-code arch=compute_90a,code=sm_90a", ["90a"], []),
        ("-gencode arch=compute_100f,code=sm_100f", ["100f"], []),
        ("-arch=sm_80", ["80"], ["80"]),
        ("-arch sm_90a", ["90a"], ["90a"]),
        ("--gpu-architecture=compute_80", [], ["80"]),
        ("-arch=compute_80 -code=sm_80,sm_86", ["80", "86"], []),
        ("--gpu-architecture compute_80 --gpu-code sm_86,compute_80", ["86"], ["80"]),
        ("-arch=sm_80 -arch=sm_90", ["90"], ["90"]),  # nvcc: the last value is used
        ("-gencode=arch=compute_80,code=sm_80 -arch=sm_90", ["80", "90"], ["90"]),
    ],
)
def test_a_compile_lines_arch_flags_ask_for_these_cubins_and_ptx(
    line: str, cubins: list[str], ptx: list[str]
) -> None:
    assert asked(f"nvcc -c x.cu -o x.o {line} -O3") == request(cubins, ptx)


def test_values_that_name_no_one_target_are_kept_apart() -> None:
    assert asked("nvcc -arch=all -c x.cu") == request([], [], ("all",))
    assert asked("nvcc -gencode arch=compute_90,code=lto_90 -c x.cu") == request(
        [], [], ("lto_90",)
    )


def test_a_line_without_arch_flags_asks_for_nothing_in_particular() -> None:
    assert asked("nvcc -c x.cu -o x.o -O3 -std=c++17 -DARCH=1") is None


def test_the_flags_are_kept_as_the_line_spelled_them() -> None:
    flags = arch_flags(["nvcc", "-gencode", "arch=compute_80,code=sm_80", "-arch=sm_90", "-c"])
    assert [f.text for f in flags] == ["-gencode arch=compute_80,code=sm_80", "-arch=sm_90"]
    assert [f.kind for f in flags] == ["gencode", "arch"]


@pytest.mark.parametrize(
    ("sms", "ptx"),
    [(["75", "80", "90a", "100f"], "100"), (["80"], None), (["90"], "90")],
)
def test_the_cells_cmake_spelling_reads_back_as_its_request(
    sms: list[str], ptx: str | None
) -> None:
    targets = [T.parse(s) for s in sms]
    ptx_target = T.parse(ptx) if ptx else None
    wanted = cell_request(targets, ptx_target)
    assert from_cmake(cmake_architectures(targets, ptx_target)) == wanted
    assert from_cmake(to_cmake(wanted)) == wanted


def test_a_cmake_entry_that_is_not_one_of_this_tools_spellings_is_refused() -> None:
    with pytest.raises(ValueError, match="not a GPU target"):
        from_cmake("all-major")
    with pytest.raises(ValueError, match="not a CMAKE_CUDA_ARCHITECTURES entry"):
        from_cmake("90-fake")


@pytest.mark.parametrize(
    ("line", "source"),
    [
        ("nvcc -c /p/csrc/a.cu -o /b/a.o", "/p/csrc/a.cu"),
        ("sccache nvcc -x cu -c /p/a.cpp -o /b/a.o", "/p/a.cpp"),
        ("nvcc -c a.cu b.cu", None),  # two sources: no one compile to name
        ("nvcc -E a.cu", None),
        ("nvcc -M a.cu -o a.d", None),
        ("nvcc --version", None),
        ("nvcc -dlink a.o b.o -o dlink.o", None),
        ("nvcc -c a.cpp -o a.o", None),
        ("nvcc -MF x.cu -c a.cu", "a.cu"),  # an output named like a source is no source
    ],
)
def test_the_one_cuda_source_a_compile_line_compiles(line: str, source: str | None) -> None:
    assert compiled_source(line.split()) == source


def test_only_the_projects_own_sources_are_held_to_the_cell() -> None:
    assert project_name("/p/csrc/a.cu", root="/p", cwd="/b") == "csrc/a.cu"
    assert project_name("csrc/a.cu", root="/p", cwd="/p") == "csrc/a.cu"
    assert project_name("/usr/share/cmake/CMakeCUDACompilerABI.cu", root="/p", cwd="/b") is None
    assert project_name("/p/build/CMakeFiles/CMakeScratch/src.cu", root="/p", cwd="/b") is None
    assert project_name("/q/a.cu", root=None, cwd="/b") == "/q/a.cu"


CELL = cell_request([T(75), T(80), T(90), T(100)], T(100))
OWN = "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=[sm_90,compute_90]"


def test_a_compile_of_other_targets_than_the_cells_is_a_stop_naming_file_and_flags() -> None:
    line = f"/h/bin/nvcc -c /p/csrc/scale.cu -o /b/scale.o -O3 {OWN}".split()
    stop = stop_of(line, cell=CELL, root="/p", cwd="/b", cuda_major=13)
    assert stop is not None
    assert stop.source == "csrc/scale.cu"
    assert stop.flags == tuple(OWN.split())
    assert stop.asked == request(["80", "90"], ["90"])
    assert Stop.from_json(stop.to_json()) == stop


def test_a_compile_of_exactly_the_cells_targets_goes_on() -> None:
    torch_spelling = (
        "-gencode=arch=compute_100,code=compute_100 -gencode=arch=compute_100,code=sm_100 "
        "-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_80,code=sm_80 "
        "-gencode=arch=compute_90,code=sm_90"
    )
    line = f"nvcc -c /p/a.cu -o a.o {torch_spelling}".split()
    assert stop_of(line, cell=CELL, root="/p", cwd="/b", cuda_major=13) is None
    # the same line of a file outside the project is not the project's compile
    other = f"nvcc -c /elsewhere/a.cu {OWN}".split()
    assert stop_of(other, cell=CELL, root="/p", cwd="/b", cuda_major=13) is None


def test_a_compile_with_no_arch_flag_builds_nvccs_default_and_is_a_stop() -> None:
    # torch drops its flags when any nvcc flag has 'arch' in it (-Xcompiler -march=native)
    line = ["nvcc", "-c", "/p/a.cu", "-Xcompiler", "-march=native"]
    stop = stop_of(line, cell=CELL, root="/p", cwd="/", cuda_major=13)
    assert stop is not None
    assert stop.asked == request(["75"], ["75"])
    assert "no arch flag" in stop.flags[0]


def test_the_stop_message_says_each_thing_on_its_line_with_the_list_to_paste() -> None:
    line = f"nvcc -c /p/csrc/scale.cu {OWN}".split()
    stop = stop_of(line, cell=CELL, root="/p", cwd="/", cuda_major=13)
    assert stop is not None
    lines = stop_message(stop, HINTS).splitlines()
    assert len(lines) == 7
    assert "stopped at its first compile" in lines[0]
    assert (
        lines[1]
        .split(":", 1)[1]
        .strip()
        .startswith(
            "sm_75, sm_80, sm_90, sm_100, PTX compute_100 (its sms and ptx, given to the build "
            "as TORCH_CUDA_ARCH_LIST)"
        )
    )
    assert lines[2].endswith("the project's flags ask for: sm_80, sm_90, PTX compute_90")
    assert lines[3].endswith(f"csrc/scale.cu, compiled with {OWN}")
    assert lines[4] == "  why: CAUSE"
    assert lines[5].endswith("sms: [80, 90] and ptx: 90")
    assert lines[6] == "  or HONOUR"
    said = stop_message(stop, HINTS, remedy_problem="NO").splitlines()
    assert said[5] == "  either (the matrix cannot say what the project builds: NO)"


@pytest.mark.parametrize(
    ("wanted", "pasted"),
    [
        (request(["80", "86", "87", "90", "100", "103", "110", "120", "121"], []),
         "sms: [80, 86, 87, 90, 100, 103, 110, 120, 121] and ptx: none"),
        (request(["80", "90a"], ["90a"]), "sms: [80, 90a] and ptx: 90a"),
        (request(["80"], ["80", "90"]),
         "sms: [80]; the project builds PTX for compute_80, compute_90, and a cell holds one "
         "PTX target"),
    ],
)  # fmt: skip
def test_the_targets_to_paste_are_in_matrix_yaml_syntax(wanted: ArchRequest, pasted: str) -> None:
    assert matrix_targets(wanted) == pasted


SETUP = """\
import os
# -gencode arch=compute_70,code=sm_70 is a comment
NVCC_FLAGS = [
    "-O3",
    "-gencode", "arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90a,code=sm_90a",
    '--generate-code=arch=compute_120,code=[sm_120,compute_120]',
]
"""


def test_the_literal_arch_flags_of_a_setup_py_and_their_first_line() -> None:
    literal = literal_flags(read_setup_py(SETUP))
    assert literal is not None
    assert literal.line == 5
    assert literal.request == request(["80", "90a", "120"], ["120"])
    assert (
        literal_flags(read_setup_py("setup(ext_modules=[CUDAExtension('x', ['x.cu'])])\n")) is None
    )
    documented = '"""Pass -gencode=arch=compute_80,code=sm_80 yourself."""\nsetup()\n'
    assert literal_flags(read_setup_py(documented)) is None  # a docstring is not a flag
    # a computed flag says no target until setup.py runs: the first compile shows it
    computed = 'flags = ["-gencode", f"arch=compute_{num},code=sm_{num}"]\n'
    assert literal_flags(read_setup_py(computed)) is None
    both = literal_flags(read_setup_py(computed + 'more = ["arch=compute_80,code=sm_80"]\n'))
    assert both is not None
    assert (both.line, both.flags) == (2, ("arch=compute_80,code=sm_80",))


def test_the_dry_run_warns_only_where_the_literal_flags_differ_from_the_cell() -> None:
    literal = literal_flags(read_setup_py(SETUP))
    assert literal is not None
    warning = literal_warning("setup.py", literal, CELL, HINTS)
    assert warning is not None
    assert warning.startswith("setup.py:5 passes its own nvcc arch flags")
    assert "sms: [80, 90a, 120] and ptx: 120" in warning
    assert "CAUSE" in warning
    assert "HONOUR" in warning
    same = cell_request([T(80), T.parse("90a"), T(120)], T(120))
    assert literal_warning("setup.py", literal, same, HINTS) is None


def test_a_build_log_shows_the_projects_own_flags() -> None:
    log = (
        "k3: building\n"
        "[1/3] /h/cuda-home/bin/nvcc --generate-dependencies-with-compile -c /p/a.cu -o a.o "
        f"{OWN}\n"
        "[2/3] c++ -c /p/b.cpp -o b.o\n"
    )
    stop = stop_in_log(log, CELL, cuda_major=13)
    assert stop is not None
    assert stop.asked == request(["80", "90"], ["90"])
    assert stop_in_log(log.replace(OWN, "-arch=sm_80"), cell_request([T(80)], T(80)),
                       cuda_major=13) is None  # fmt: skip
