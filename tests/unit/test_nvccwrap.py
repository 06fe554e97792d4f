"""release.toolchain.nvccwrap's pure parts: the command a compile runs (the names that make
a torch cell's objects independent of the checkout), and the stop a compile makes."""

from __future__ import annotations

from release.backends.archflags import cell_request, to_cmake
from release.targets import GpuTarget
from release.toolchain.nvccwrap import checked, output_of, rewritten

NAMED = ["-frandom-seed=csrc/a.cu", "-Xcudafe", "--orig_src_path_name=csrc/a.cu"]


def test_one_project_source_gets_its_path_inside_the_project_as_its_name() -> None:
    args = ["-c", "/p/csrc/a.cu", "-o", "/b/a.o"]
    assert rewritten("/t/nvcc", args, root="/p", cwd="/b", launcher=None) == [
        "/t/nvcc", *args, *NAMED, "--objdir-as-tempdir"
    ]  # fmt: skip
    # through sccache, which names its own temporary files
    assert rewritten("/t/nvcc", args, root="/p", cwd="/b", launcher="/s/sccache") == [
        "/s/sccache", "/t/nvcc", *args, *NAMED
    ]  # fmt: skip


def test_a_relative_source_is_named_from_the_working_directory() -> None:
    command = rewritten("nvcc", ["-c", "csrc/a.cu"], root="/p", cwd="/p", launcher=None)
    assert command == ["nvcc", "-c", "csrc/a.cu", *NAMED]


def test_a_source_outside_the_project_is_named_by_its_file_name() -> None:
    command = rewritten("nvcc", ["-c", "/elsewhere/k.cu"], root="/p", cwd="/b", launcher=None)
    assert command[-1] == "--orig_src_path_name=k.cu"


def test_lines_it_cannot_name_run_as_they_are() -> None:
    two = ["-c", "/p/a.cu", "/p/b.cu"]
    assert rewritten("nvcc", two, root="/p", cwd="/b", launcher=None) == ["nvcc", *two]
    odd = ["-c", "/p/a b.cu"]
    assert rewritten("nvcc", odd, root="/p", cwd="/b", launcher=None) == ["nvcc", *odd]
    assert rewritten("nvcc", ["--version"], root=None, cwd="/b", launcher="s") == [
        "s", "nvcc", "--version"
    ]  # fmt: skip


def test_a_compile_is_checked_against_the_targets_the_build_names() -> None:
    targets = to_cmake(cell_request([GpuTarget(80)], GpuTarget(80)))
    env = {"RELEASE_CELL_TARGETS": targets, "RELEASE_NVCC_SOURCE_ROOT": "/p"}
    same = ["nvcc", "-c", "/p/a.cu", "-arch=sm_80"]
    other = ["nvcc", "-c", "/p/a.cu", "-arch=sm_90"]
    assert checked(same, env, "/b") is None
    stop = checked(other, env, "/b")
    assert stop is not None
    assert stop.source == "a.cu"
    assert stop.flags == ("-arch=sm_90",)
    # a build that names no targets checks nothing
    assert checked(other, {}, "/b") is None


def test_the_object_a_compile_writes_is_read_from_its_output_flag() -> None:
    assert output_of(["-c", "a.cu", "-o", "build/a.o"]) == "build/a.o"
    assert output_of(["-c", "a.cu", "--output-file=/b/a.o"]) == "/b/a.o"
    assert output_of(["-c", "a.cu", "-o=a.o"]) == "a.o"
    assert output_of(["--output-file", "x.o", "-c", "a.cu"]) == "x.o"
    assert output_of(["-odir", "objs", "-c", "a.cu"]) is None
    assert output_of(["--version"]) is None
    assert output_of(["-c", "a.cu", "-o"]) is None
