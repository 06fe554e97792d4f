"""release.toolchain.nvccwrap's pure parts: the command a compile runs (the names that make
a torch cell's objects independent of the checkout), and the stop a compile makes."""

from __future__ import annotations

import shutil
from pathlib import Path

from release.backends.archflags import cell_request, to_cmake
from release.backends.compiled import pieces, recorded_digests, recorded_origins
from release.targets import GpuTarget
from release.toolchain.nvccwrap import (
    Step,
    checked,
    compiler_index,
    output_of,
    record_step,
    rewritten,
    step_of,
    swapped,
)

ELF_DEVICE = Path(__file__).resolve().parents[1] / "data" / "elf-device"

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


def test_a_steps_output_and_inputs_are_read_from_its_line() -> None:
    assert step_of(["-c", "k.cu", "-o", "k.o", "-I", "inc", "-Xcompiler", "-fPIC"]) == Step(
        output="k.o", named=("k.cu", "inc")
    )
    assert step_of(["-shared", "-o", "x.so", "pre.o", "-Lthird", "-l", "pre", "-lcudart"]) == Step(
        output="x.so", named=("pre.o",), libraries=("pre", "cudart"), library_dirs=("third",)
    )
    assert step_of(["-dlink", "--output-file=d.o", "a.o", "--library-path=l"]) == Step(
        output="d.o", named=("a.o",), library_dirs=("l",)
    )
    # lines that write nothing (sccache's dry run of a compile, a preprocessing)
    assert step_of(["-x", "cu", "-o", "k.o", "-c", "k.cu", "--dryrun", "--keep"]) is None
    assert step_of(["-c", "k.cu", "-E", "-o", "k.ii"]) is None
    assert step_of(["-c", "k.cu", "-dryrun", "-o", "k.o"]) is None
    assert step_of(["-c", "k.cu"]) is None


def test_a_launched_line_runs_nvcc_where_it_names_the_cells_compiler_script() -> None:
    line = ["/s/sccache", "/b/nvcc-wrapper/nvcc", "-c", "k.cu", "-o", "k.o"]
    assert swapped(line, script="/b/nvcc-wrapper/nvcc", real="/t/bin/nvcc") == [
        "/s/sccache", "/t/bin/nvcc", "-c", "k.cu", "-o", "k.o"
    ]  # fmt: skip
    assert swapped(line, script=None, real="/t/bin/nvcc") == line
    assert compiler_index(["/s/sccache", "/t/bin/nvcc", "-c"], "/t/bin/nvcc") == 1
    assert compiler_index(["ccache", "/elsewhere/nvcc", "-c"], None) == 1
    assert compiler_index(["/t/bin/nvcc", "-c"], None) == 0


def copied(where: Path, *names: str) -> None:
    for name in names:
        shutil.copy(ELF_DEVICE / name, where / name)


def test_a_compile_records_the_fatbins_of_the_object_it_wrote(tmp_path: Path) -> None:
    copied(tmp_path, "rdc-a.cu", "rdc-a.o")
    records = tmp_path / "records"
    step = step_of(["-rdc=true", "-c", "rdc-a.cu", "-o", "rdc-a.o"])
    assert step is not None
    record_step(step, records, str(tmp_path), None)
    (piece,) = pieces((tmp_path / "rdc-a.o").read_bytes()) or ()
    assert recorded_digests(records) == {piece.digest}


def test_a_link_of_a_prebuilt_object_records_nothing_and_notes_whence_it_came(
    tmp_path: Path,
) -> None:
    # F18: `nvcc -shared -o prebuilt.so third_party/prebuilt.o` through the wrapper: the
    # shared object holds the object's fatbin, copied; no compile of this build wrote it
    copied(tmp_path, "prebuilt.so")
    (tmp_path / "third_party").mkdir()
    copied(tmp_path / "third_party", "prebuilt.o")
    records = tmp_path / "records"
    step = step_of(["-shared", "-o", "prebuilt.so", "third_party/prebuilt.o"])
    assert step is not None
    record_step(step, records, str(tmp_path), str(tmp_path))
    assert recorded_digests(records) == frozenset()
    (prebuilt,) = pieces((tmp_path / "third_party" / "prebuilt.o").read_bytes()) or ()
    wrote = "an input of the nvcc step that wrote prebuilt.so"
    assert recorded_origins(records) == {prebuilt.digest: f"third_party/prebuilt.o, {wrote}"}


def test_a_link_beside_relocatable_objects_records_nothing_where_one_input_is_prebuilt(
    tmp_path: Path,
) -> None:
    copied(tmp_path, "rdc-a.o", "rdc-b.o", "rdc-dlink.o", "prebuilt.o", "rdc-prebuilt.so")
    records = tmp_path / "records"
    records.mkdir()
    for name in ("rdc-a.o", "rdc-b.o", "rdc-dlink.o"):
        for piece in pieces((tmp_path / name).read_bytes()) or ():
            (records / piece.digest).touch()
    before = recorded_digests(records)
    line = ["-shared", "-o", "rdc-prebuilt.so", "rdc-a.o", "rdc-b.o", "rdc-dlink.o", "prebuilt.o"]
    step = step_of(line)
    assert step is not None
    record_step(step, records, str(tmp_path), None)
    assert recorded_digests(records) == before
    assert len(recorded_origins(records)) == 1


def test_a_prebuilt_static_library_named_by_l_is_an_input(tmp_path: Path) -> None:
    copied(tmp_path, "rdc-prebuilt.so")
    (tmp_path / "lib").mkdir()
    copied(tmp_path / "lib", "libprebuilt.a")
    step = step_of(["-shared", "-o", "rdc-prebuilt.so", "-Llib", "-lprebuilt"])
    assert step is not None
    records = tmp_path / "records"
    record_step(step, records, str(tmp_path), str(tmp_path))
    assert recorded_digests(records) == frozenset()
    assert list(recorded_origins(records).values()) == [
        "lib/libprebuilt.a, an input of the nvcc step that wrote rdc-prebuilt.so"
    ]


def test_a_device_link_of_recorded_objects_records_its_own_fatbin(tmp_path: Path) -> None:
    copied(tmp_path, "rdc-a.o", "rdc-b.o", "rdc-dlink.o")
    records = tmp_path / "records"
    records.mkdir()
    for name in ("rdc-a.o", "rdc-b.o"):
        for piece in pieces((tmp_path / name).read_bytes()) or ():
            (records / piece.digest).touch()
    step = step_of(["-dlink", "-Xcompiler", "-fPIC", "-o", "rdc-dlink.o", "rdc-a.o", "rdc-b.o"])
    assert step is not None
    record_step(step, records, str(tmp_path), None)
    (dlink,) = pieces((tmp_path / "rdc-dlink.o").read_bytes()) or ()
    assert dlink.digest in recorded_digests(records)
    assert recorded_origins(records) == {}
