"""A matrix with `build:` sections, what each cell can build with here, the doctor's rows,
and the inspection of a wheel whose device code is in a shared object. No process runs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from release.backends import BuildRecipe
from release.backends.recipe import TargetsFormat
from release.backends.registry import targets_variables
from release.building.pipeline import relabelled
from release.building.preview import TOOLKIT_INPUTS, doctor_rows, planned_inputs
from release.building.stage import buildable_problem, check_cells, pruned_notes
from release.cli import main
from release.errors import ConfigError, ToolchainError
from release.inspection.devicecode import NO_DEVICE_CODE
from release.inspection.fatbin import FatbinContents
from release.inspection.wheel import inspect_wheel
from release.matrix import Cell, load_matrix, matrix_json_schema
from release.targets import GpuTarget
from release.toolchain import ToolchainPlan, envcache, resolve
from release.yamlspec import as_plain

TESTS = Path(__file__).resolve().parents[1]
BUILD = TESTS / "data" / "matrix" / "build"
FIXTURE = TESTS / "fixtures" / "cmake_kernels" / "matrix.yaml"
HOST_SO = TESTS / "data" / "elf" / "x86_64-glibc2.28.so"
DEVICE_SO = TESTS / "data" / "elf-device" / "x86_64-nv_fatbin.so"
CACHE = Path("/nonexistent/toolchains")


def plan(cell: Cell, cuda_home: Path | None = None, host_arch: str = "x86_64") -> ToolchainPlan:
    return resolve(
        str(cell.cuda), cell.arch, cuda_home=cuda_home, cache_dir=CACHE, host_arch=host_arch
    )


def not_buildable(cell: Cell, plan: ToolchainPlan) -> ToolchainError:
    error = buildable_problem(cell, plan)
    assert error is not None
    return error


def test_the_fixture_matrix_loads_with_its_cmake_backend() -> None:
    (cell,) = load_matrix(FIXTURE).cells
    assert cell.id == "13.0-x86_64"
    assert cell.wheel_filename == ("fixture_cmake_kernels-0.2.0-py3-none-manylinux_2_34_x86_64.whl")
    assert cell.build == BuildRecipe(backend="cmake")


def test_cuda_versions_override_the_releases_build() -> None:
    recipes = {str(c.cuda): c.build for c in load_matrix(BUILD / "torch-and-cmake.yaml").cells}
    assert recipes["13.0"] == BuildRecipe(
        backend="cmake",
        env=(("SGL_KERNEL_ENABLE_SM90A", "1"),),
        config_settings=(("build-dir", "build/{wheel_tag}"),),
    )
    assert recipes["12.9"] == BuildRecipe(
        backend="torch",
        env=(("MAX_JOBS", "4"), ("SGL_KERNEL_ENABLE_SM90A", "1")),
        config_settings=(("build-dir", "build/{wheel_tag}"),),
    )


def test_build_sections_of_the_wrong_shape_name_file_line_and_key() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "bad-shape.yaml")
    assert raised.value.problems == (
        "bad-shape.yaml:3:12: build.backend: 'cmak' is not one of 'release', 'cmake', "
        "'torch'; did you mean 'cmake'?",
        'bad-shape.yaml:14:23: cuda["13.0"].build.env.MAX_JOBS: expected a string, got an '
        "integer (quote it)",
    )


def test_build_sections_that_contradict_the_cell_are_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "bad-rules.yaml")
    problems = raised.value.problems
    setting = 'cuda["13.0"].build.config-settings["cmake.define.CMAKE_CUDA_ARCHITECTURES"]'
    assert [p.split(": ")[0:2] for p in problems] == [
        ["bad-rules.yaml:5:16", "build.env.CUDAARCHS"],
        ["bad-rules.yaml:6:21", "build.env.TWINE_PASSWORD"],
        ["bad-rules.yaml:7:22", "build.env.LD_LIBRARY_PATH"],
        ["bad-rules.yaml:12:8", "defaults.ptx"],
        ["bad-rules.yaml:18:34", 'cuda["13.0"].build.env.PATH'],
        ["bad-rules.yaml:19:31", 'cuda["13.0"].build.targets-env.MAX_JOBS'],
        ["bad-rules.yaml:21:48", setting],
    ]
    assert "credential" in problems[1]
    assert "not from the cell's pinned toolchain" in problems[2]
    # a cmake cell may build PTX alone; a variable in TORCH_CUDA_ARCH_LIST's form cannot
    assert "K3_LIST of targets-env (torch-arch-list): torch's TORCH_CUDA_ARCH_LIST" in problems[3]
    assert "build.cuda-libraries" in problems[4]
    assert problems[5].endswith(
        "MAX_JOBS is in env too: the cell's targets are its value, remove one"
    )


def test_targets_env_gives_each_variable_the_cells_targets_in_its_form() -> None:
    sms, ptx = (GpuTarget(80), GpuTarget(90, "a"), GpuTarget(100)), GpuTarget(100)
    variables: tuple[tuple[str, TargetsFormat], ...] = (
        ("K3_ARCHS", "sms"),
        ("K3_LIST", "torch-arch-list"),
    )
    assert targets_variables(variables, sms, ptx) == {
        "K3_ARCHS": "80;90a;100",
        "K3_LIST": "8.0;9.0a;10.0+PTX",
    }
    assert targets_variables(variables, (), None) == {}  # device-code: none
    # a cmake cell builds PTX alone (100-virtual) and asks for no variable: nothing to spell
    assert targets_variables((), (GpuTarget(90),), GpuTarget(100)) == {}
    assert targets_variables(variables[:1], (GpuTarget(90),), GpuTarget(100)) == {"K3_ARCHS": "90"}


def test_a_torch_cell_with_ptx_alone_is_refused_at_load() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "torch-ptx-alone.yaml")
    ptx, arch_list = raised.value.problems
    assert ptx.startswith("torch-ptx-alone.yaml:6:8: defaults.ptx: torch's TORCH_CUDA_ARCH_LIST")
    assert "add 100 to sms" in ptx
    assert "TORCH_CUDA_ARCH_LIST is what `release` gives the torch backend" in arch_list


def test_the_schema_accepts_what_the_loader_accepts() -> None:
    schema = matrix_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    build = schema["properties"]["build"]["anyOf"][0]
    assert build["properties"]["backend"]["anyOf"][0] == {"enum": ["release", "cmake", "torch"]}
    for path in (FIXTURE, BUILD / "torch-and-cmake.yaml"):
        assert validator.is_valid(as_plain(YAML(typ="rt").load(path.read_text()))), path
    shape = as_plain(YAML(typ="rt").load((BUILD / "bad-shape.yaml").read_text()))
    assert not validator.is_valid(shape)


def test_a_cmake_cell_of_cuda_12_9_asks_for_a_toolkit() -> None:
    loaded = load_matrix(BUILD / "torch-and-cmake.yaml")
    cell = next(c for c in loaded.cells if c.id == "12.9-x86_64-torch2.14.1")
    error = not_buildable(cell, plan(cell))
    assert error.exit_code == 3
    assert "PyPI has no nvcc for CUDA 12.9" in error.message
    assert error.hint is not None
    assert "--cuda-home / CUDA_HOME" in error.hint
    with_toolkit = plan(cell, cuda_home=Path("/usr/local/cuda-12.9"))
    assert buildable_problem(cell, with_toolkit) is None


def test_a_system_toolkit_without_the_drivers_stub_stops_a_cell_that_links_it(
    tmp_path: Path,
) -> None:
    """--cuda-home is used as it is: a cell whose build.cuda-libraries names cuda needs its
    lib64/stubs/libcuda.so, said before anything builds; the toolchain's CUDA_HOME makes
    its own."""
    loaded = load_matrix(BUILD / "torch-and-cmake.yaml")
    cell = next(c for c in loaded.cells if c.id == "13.0-x86_64")
    cell = replace(cell, build=replace(cell.build, cuda_libraries=("cuda",)))
    error = not_buildable(cell, plan(cell, cuda_home=tmp_path))
    assert error.message == (
        f"13.0-x86_64: build.cuda-libraries names cuda, the driver's libcuda, and the CUDA "
        f"toolkit at {tmp_path} has no link stub of it ({tmp_path}/lib64/stubs/libcuda.so)"
    )
    assert error.hint is not None
    assert "leave out --cuda-home" in error.hint
    (tmp_path / "lib64" / "stubs").mkdir(parents=True)
    (tmp_path / "lib64" / "stubs" / "libcuda.so").write_bytes(b"")
    assert buildable_problem(cell, plan(cell, cuda_home=tmp_path)) is None
    assert buildable_problem(cell, plan(cell)) is None  # PyPI's: the CUDA_HOME makes it


def test_an_aarch64_cell_of_an_nvcc_backend_says_where_it_builds() -> None:
    loaded = load_matrix(BUILD / "torch-and-cmake.yaml")
    cell = next(c for c in loaded.cells if c.id == "13.0-aarch64")
    error = not_buildable(cell, plan(cell))
    assert "cannot cross-compile" in error.message
    assert error.hint is not None
    assert "the reusable workflow wheels.yml does" in error.hint
    assert "release build --arch aarch64" in error.hint
    native = plan(cell, host_arch="aarch64")
    assert buildable_problem(cell, native) is None


def test_one_error_names_every_cell_that_cannot_build_here_and_where_it_can() -> None:
    cells = load_matrix(BUILD / "torch-and-cmake.yaml").cells
    plans = {c.id: plan(c) for c in cells}
    with pytest.raises(ToolchainError) as raised:
        check_cells(cells, plans)
    lines = raised.value.message.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "13.0-aarch64",
        "12.9-x86_64-torch2.14.1",
        "12.9-aarch64-torch2.14.1",
    ]
    hint = raised.value.hint or ""
    assert "manylinux container of the cell's level" in hint
    assert "--cuda-home / CUDA_HOME" in hint
    assert hint.endswith("or leave these cells out with --cuda / --arch")
    here = [c for c in cells if c.id == "13.0-x86_64"]
    check_cells(here, plans)


def test_a_dry_run_names_the_toolkits_paths_only_where_they_are_known() -> None:
    cells = load_matrix(BUILD / "torch-and-cmake.yaml").cells
    cmake = next(c for c in cells if c.id == "13.0-x86_64")
    inputs = planned_inputs(cmake, plan(cmake), jobs=3)
    assert inputs.env["CUDAARCHS"] == "75-real;80-real;86-real;89-real;90-real;100-real;100-virtual"
    assert inputs.env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"
    assert inputs.env["SGL_KERNEL_ENABLE_SM90A"] == "1"
    assert inputs.config_settings == {"build-dir": "build/{wheel_tag}"}
    assert not TOOLKIT_INPUTS & {*inputs.env, *inputs.config_settings}
    torch = next(c for c in cells if c.id == "12.9-x86_64-torch2.14.1")
    system = plan(torch, cuda_home=Path("/usr/local/cuda-12.9"))
    inputs = planned_inputs(torch, system, jobs=3)
    assert inputs.env["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;8.9;9.0;10.0+PTX"
    assert inputs.env["CUDA_HOME"] == "/usr/local/cuda-12.9"
    assert inputs.env["MAX_JOBS"] == "4"  # the matrix's own, over the cell's jobs


def test_a_dry_run_shows_what_each_backend_receives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    matrix = str(BUILD / "torch-and-cmake.yaml")
    args = ["build", "--matrix", matrix, "--dry-run", "--json", "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    cells = {c["cell"]: c for c in json.loads(capsys.readouterr().out)["cells"]}
    cmake = cells["13.0-x86_64"]
    assert (cmake["backend"], cmake["builds"]) == ("cmake", "here")
    assert cmake["inputs"]["CUDAARCHS"] == (
        "75-real;80-real;86-real;89-real;90-real;100-real;100-virtual"
    )
    assert cmake["inputs"]["SOURCE_DATE_EPOCH"] == "1700000000"
    assert cmake["config_settings"] == {"build-dir": "build/{wheel_tag}"}
    assert cmake["command"][-1] == "-Cbuild-dir=build/{wheel_tag}"
    torch = cells["12.9-x86_64-torch2.14.1"]
    assert torch["inputs"]["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;8.9;9.0;10.0+PTX"
    assert torch["device_compiler"].startswith("MISSING")
    assert cells["13.0-aarch64"]["builds"].startswith("not here: the cmake backend")
    assert list(tmp_path.iterdir()) == [], "a dry run provisions nothing"


def test_a_dry_run_says_what_a_jit_first_torch_cells_wheel_is_held_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    matrix = str(BUILD / "torch-jit.yaml")
    args = ["build", "--matrix", matrix, "--dry-run", "--json", "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert cell["wheel"] == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert "TORCH_CUDA_ARCH_LIST" not in cell["inputs"]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert cell["torch"].startswith(f"torch 2.14.1 for Python {python}, from pip index")
    assert cell["notes"] == [
        "no device code (device-code: none): its wheel must hold no fatbin, cubin or PTX file "
        "and no shared object with a fatbin section",
        f"one py3-none wheel (python: any) built with Python {python}: its shared objects "
        "must use no Python C-API",
    ]


def test_doctor_shows_per_cell_what_its_backend_uses_and_receives() -> None:
    cells = load_matrix(BUILD / "torch-and-cmake.yaml").cells
    plans = {c.id: plan(c) for c in cells}
    rows = {r.cell: r for r in doctor_rows(cells, plans)}
    assert sorted(rows) == [
        "12.9-aarch64-torch2.14.1",
        "12.9-x86_64-torch2.14.1",
        "13.0-aarch64",
        "13.0-x86_64",
    ]
    cmake = rows["13.0-x86_64"]
    assert (cmake.backend, cmake.builds) == ("cmake", "here")
    assert "nvidia-cuda-nvcc==13.0.88" in cmake.device
    assert "cmake==4.4.5" in cmake.tools
    assert "75-real;80-real;86-real;89-real;90-real;100-real;100-virtual" in cmake.receives
    assert "from the matrix: SGL_KERNEL_ENABLE_SM90A, -Cbuild-dir" in cmake.receives
    torch = rows["12.9-x86_64-torch2.14.1"]
    assert torch.backend == "torch"
    assert torch.device.startswith("MISSING: the torch backend compiles with nvcc")
    assert torch.builds.startswith("not here: no nvcc for CUDA 12.9")
    assert "7.5;8.0;8.6;8.9;9.0;10.0+PTX" in torch.receives
    assert rows["13.0-aarch64"].builds.startswith("not here: the cmake backend builds aarch64")
    assert len(cmake.cells()) == len(cmake.COLUMNS) == len(cmake.KEYS)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def fixture_wheel(
    cell: Cell, *, version: str | None = None, library: Path = HOST_SO
) -> tuple[str, bytes]:
    """The fixture's wheel as its build lays it out, its library standing in as a host .so."""
    version = version or str(cell.version)
    info = f"fixture_cmake_kernels-{version}.dist-info"
    files = {
        "fixture_kernels/__init__.py": b"",
        "fixture_kernels/libfxk.so": library.read_bytes(),
        f"{info}/METADATA": f"Metadata-Version: 2.4\nName: fixture-cmake-kernels\n"
        f"Version: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        + f"Tag: py3-none-{cell.platform_tag}\n".encode(),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        rows = [record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
        archive.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    name = f"fixture_cmake_kernels-{version}-py3-none-{cell.platform_tag}.whl"
    return name, buffer.getvalue()


def no_fatbin(name: str, path: Path) -> FatbinContents:
    raise AssertionError(f"{name}: the wheel has no fatbin file")


def test_device_code_in_a_shared_object_answers_the_no_fatbin_check() -> None:
    (cell,) = load_matrix(FIXTURE).cells
    name, data = fixture_wheel(cell)
    full = FatbinContents(sms=tuple(str(s) for s in cell.sms), ptx=("100",))
    # the stand-in library has no .nv_fatbin section: no device code found anywhere
    report = inspect_wheel(name, data, cell, list_fatbin=no_fatbin, list_elf=lambda n, d: full)
    assert report.problems == (NO_DEVICE_CODE,)


def test_a_shared_object_holding_the_cells_targets_passes_and_the_trap_fails() -> None:
    (cell,) = load_matrix(FIXTURE).cells
    name, data = fixture_wheel(cell, library=DEVICE_SO)
    full = FatbinContents(sms=tuple(str(s) for s in cell.sms), ptx=("100",))
    report = inspect_wheel(name, data, cell, list_fatbin=no_fatbin, list_elf=lambda n, d: full)
    assert report.problems == ()
    assert (report.sms, report.ptx) == (full.sms, full.ptx)
    first_only = FatbinContents(sms=("75",), ptx=())
    trapped = inspect_wheel(
        name, data, cell, list_fatbin=no_fatbin, list_elf=lambda n, d: first_only
    )
    assert trapped.sms == ("75",)
    assert len(trapped.problems) == 6
    assert "fixture_kernels/libfxk.so has no cubin for sm_80" in trapped.problems[0]


def test_a_cell_without_device_code_is_held_to_none_instead_of_its_targets() -> None:
    (cell,) = load_matrix(FIXTURE).cells
    host_only = replace(cell, sms=(), ptx=None, device_code="none")
    name, data = fixture_wheel(host_only)
    assert inspect_wheel(name, data, host_only, list_fatbin=no_fatbin).problems == ()
    name, data = fixture_wheel(host_only, library=DEVICE_SO)
    (problem,) = inspect_wheel(name, data, host_only, list_fatbin=no_fatbin).problems
    assert problem.startswith(
        "fixture_kernels/libfxk.so holds device code in its .nv_fatbin section, and the cell "
        "declares device-code: none"
    )


def test_relabelled_gives_the_wheel_the_cells_version(tmp_path: Path) -> None:
    text = FIXTURE.read_text().replace(
        "destination: pypi\n", "destination: github\n    local-label: cu129\n", 1
    )
    text = text.replace(
        "  pypi:\n    kind: pypi\n", "  github: {kind: github, repository: o/fixture}\n"
    )
    text = text.replace("project: .", f"project: {FIXTURE.parent}")
    (tmp_path / "matrix.yaml").write_text(text)
    (cell,) = load_matrix(tmp_path / "matrix.yaml").cells
    assert cell.local_label == "cu129"
    name, data = fixture_wheel(cell, version="0.2.0")
    (tmp_path / name).write_bytes(data)
    labelled = relabelled(tmp_path / name, cell)
    assert labelled.name == cell.wheel_filename
    assert not (tmp_path / name).exists()
    assert relabelled(labelled, cell) == labelled


# ---------------------------------------------------------------- build.requires, cuda-libraries


def test_build_requires_and_cuda_libraries_merge_per_cuda_version() -> None:
    """A CUDA version's requirement replaces the release's of the same distribution; its
    libraries add to the release's."""
    cells = {str(c.cuda): c for c in load_matrix(BUILD / "torch-jit-libraries.yaml").cells}
    assert cells["13.0"].build.requires == ("apache-tvm-ffi==0.1.8", "ninja")
    assert cells["13.0"].build.cuda_libraries == ("nvrtc", "cublas", "cublasLt")
    assert cells["12.9"].build.requires == ("apache-tvm-ffi==0.1.9", "ninja")
    assert cells["12.9"].build.cuda_libraries == ("nvrtc", "cublas")


def test_an_unknown_cuda_library_is_refused_at_its_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "bad-libraries.yaml")
    (problem,) = raised.value.problems
    assert problem.startswith(
        "bad-libraries.yaml:4:27: build.cuda-libraries[1]: 'cublaslt' is not one of 'cudart', "
        "'nvrtc', 'cublas', 'cublasLt',"
    )
    assert problem.endswith("did you mean 'cublasLt'?")


def test_build_requirements_are_pep_508_and_never_a_torch_cells_torch() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "bad-requires.yaml")
    invalid, torch = raised.value.problems
    assert invalid.startswith(
        "bad-requires.yaml:4:39: build.requires[1]: 'not a requirement!' is not a PEP 508 "
        "requirement ("
    )
    assert "\n" not in invalid
    assert torch == (
        "bad-requires.yaml:4:61: build.requires[2]: a torch cell builds against its pinned "
        "torch (torch:): remove it here"
    )


def test_cuda_libraries_are_for_the_backends_that_build_in_a_cuda_home() -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(BUILD / "release-libraries.yaml")
    (problem,) = raised.value.problems
    assert problem.startswith('release-libraries.yaml:9:13: cuda["13.0"].build.cuda-libraries: ')
    assert "cuda-libraries are for cmake and torch cells" in problem


def cell_plan_of(cell: Cell) -> ToolchainPlan:
    return resolve(
        str(cell.cuda), cell.arch, cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        cuda_libraries=cell.build.cuda_libraries, builds_in_cuda_home=True,
    )  # fmt: skip


def test_a_12_9_torch_cell_without_device_code_builds_here_without_nvcc() -> None:
    """PyPI has no nvcc for 12.9; a cell that compiles no device code needs none."""
    cells = {str(c.cuda): c for c in load_matrix(BUILD / "torch-jit-libraries.yaml").cells}
    cell = cells["12.9"]
    assert buildable_problem(cell, cell_plan_of(cell)) is None
    fatbin = replace(cell, device_code="fatbin")
    assert "PyPI has no nvcc for CUDA 12.9" in not_buildable(fatbin, plan(fatbin)).message


def test_doctor_says_a_cell_without_nvcc_builds_with_its_libraries() -> None:
    cells = load_matrix(BUILD / "torch-jit-libraries.yaml").cells
    rows = {r.cell: r for r in doctor_rows(cells, {c.id: cell_plan_of(c) for c in cells})}
    no_nvcc = rows["12.9-x86_64-torch2.11.0"]
    assert no_nvcc.builds == "here"
    assert no_nvcc.device.startswith(
        "none (no device code, no nvcc); CUDA_HOME with nvrtc, cublas (PyPI "
    )
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in no_nvcc.device
    assert "build requirements from the matrix: apache-tvm-ffi==0.1.9, ninja" in no_nvcc.receives
    with_nvcc = rows["13.0-x86_64-torch2.11.0"]
    assert with_nvcc.device.startswith("nvcc (PyPI nvidia-cuda-nvcc==13.0.88")
    assert "CUDA_HOME with nvrtc, cublas, cublasLt (PyPI " in with_nvcc.device


def test_the_build_says_which_torch_environment_it_pruned_and_why() -> None:
    gone = envcache.Environment(
        path=Path("/c/torch-2.11.0-cu130-py3.11-a"), size=5 * 2**30, last_used=1
    )
    busy = envcache.Environment(
        path=Path("/c/torch-2.14.1-cu130-py3.11-b"), size=6 * 2**30, last_used=2
    )
    budget = envcache.Budget(size=4 * 2**30, source="$RELEASE_TORCH_ENV_BUDGET")
    notes = pruned_notes(
        envcache.Pruned(deleted=(gone,), in_use=(busy,), remaining=6 * 2**30), budget
    )
    assert notes == [
        "pruned the torch environment torch-2.11.0-cu130-py3.11-a (5 GiB, the least recently "
        "used): over the torch environments' budget of 4 GiB ($RELEASE_TORCH_ENV_BUDGET)",
        "the torch environments hold 6 GiB, over the torch environments' budget of 4 GiB "
        "($RELEASE_TORCH_ENV_BUDGET): 1 of them in use by builds now",
    ]
    quiet = envcache.Pruned(deleted=(), in_use=(), remaining=0)
    assert pruned_notes(quiet, budget) == []
