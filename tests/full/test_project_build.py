"""The cmake backend on a real scikit-build-core + CMake CUDA project (tests/fixtures/
cmake_kernels), for CUDA 13.0 x86_64 with nvcc, cmake and ninja from PyPI: the wheel's
shared object holds SASS for exactly the cell's SMs and PTX for its target, it installs in
a fresh venv and imports, a local label applied by rewriting agrees with METADATA, and
the SKBUILD_CMAKE_ARGS `;` trap (only the first SM built, exit 0) is caught.

RELEASE_FIXTURE_WHEELHOUSE=DIR keeps the built wheels in DIR (for tests/gpu/
test_fixture_cmake.py on a GPU machine).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from release import proc
from release.building.events import BuildEvents
from release.building.pipeline import build_cell, build_command, cell_environment, cell_inputs
from release.building.settings import BuildSettings
from release.building.stage import prepare
from release.cli import main
from release.inspection.devicecode import elf_lister, scan
from release.inspection.fatbin import FatbinLister, list_file, lister
from release.inspection.wheel import WheelReport, inspect_wheel
from release.matrix import Cell, Matrix, load_matrix
from release.records.manifest import read_manifest
from release.targets import GpuTarget
from release.toolchain import Toolchain, host_machine
from release.wheelfile import read_wheel
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "cmake_kernels"
EPOCH = 1700000000
CELL_ARCHITECTURES = "75-real,80-real,86-real,89-real,90-real,100-real,100-virtual"


@dataclass(frozen=True)
class Built:
    cell: Cell
    settings: BuildSettings
    toolchain: Toolchain
    wheel: Path
    seconds: float

    @property
    def list_fatbin(self) -> FatbinLister:
        return lister(self.toolchain.cuobjdump, dict(os.environ))

    @property
    def list_elf(self) -> FatbinLister:
        return elf_lister(self.toolchain.cuobjdump, dict(os.environ))

    def env(self) -> dict[str, str]:
        """The environment the cell's PEP 517 build gets, and its config settings' values."""
        inputs = cell_inputs(self.cell, self.toolchain, self.settings)
        return cell_environment(
            inputs, base=self.settings.environ, python=sys.executable, epoch=EPOCH
        )


def prepared(
    matrix: Matrix, cell: Cell, cache: Path, where: Path
) -> tuple[BuildSettings, Toolchain]:
    """The build stage's settings and the cell's provisioned toolchain (and build tools),
    with a wheel cache of its own under `where`."""
    if host_machine() != cell.arch:
        pytest.skip(f"the cmake backend builds {cell.arch} cells on {cell.arch} machines only")
    settings = BuildSettings(
        matrix=matrix,
        cells=(cell,),
        out=where / "dist",
        cache_dir=cache,
        work_dir=where / "work",
        environ=dict(os.environ),
        epoch=EPOCH,
    )
    settings, toolchains = prepare(settings, BuildEvents())
    settings.out.mkdir(parents=True, exist_ok=True)
    return settings, toolchains[cell.id]


def build_one(matrix: Matrix, cell: Cell, cache: Path, where: Path) -> tuple[Path, WheelReport]:
    """The cell through the one cell pipeline; its wheel and report, or the test fails."""
    settings, toolchain = prepared(matrix, cell, cache, where)
    result = build_cell(cell, toolchain, settings, sources="test")
    assert result.ok, f"{result.error}\n{result.log_tail}"
    assert result.wheel is not None
    assert result.report is not None
    return result.wheel, result.report


def keep(wheel: Path) -> None:
    wheelhouse = os.environ.get("RELEASE_FIXTURE_WHEELHOUSE")
    if wheelhouse:
        Path(wheelhouse).mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, Path(wheelhouse) / wheel.name)


@pytest.fixture(scope="module")
def built(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    matrix = load_matrix(FIXTURE / "matrix.yaml")
    (cell,) = matrix.cells
    settings, toolchain = prepared(matrix, cell, release_cache, tmp_path_factory.mktemp("built"))
    start = time.monotonic()
    result = build_cell(cell, toolchain, settings, sources="test")
    seconds = time.monotonic() - start
    assert result.ok, f"{result.error}\n{result.log_tail}"
    assert result.wheel is not None
    keep(result.wheel)
    return Built(
        cell=cell, settings=settings, toolchain=toolchain, wheel=result.wheel, seconds=seconds
    )


def installed_python(wheel: Path, venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    return python


def test_the_shared_object_holds_exactly_the_cells_sass_and_ptx(built: Built) -> None:
    assert built.wheel.name == built.cell.wheel_filename
    assert built.wheel.name == "fixture_cmake_kernels-0.2.0-py3-none-manylinux_2_34_x86_64.whl"
    members = scan(built.wheel.read_bytes(), list_fatbin=built.list_fatbin, list_elf=built.list_elf)
    assert [(m.name, m.kind) for m in members] == [("fixture_kernels/libfxk.so", "shared object")]
    contents = members[0].contents
    assert contents.sms == ("75", "80", "86", "89", "90", "100")
    assert contents.ptx == ("100",)
    report = inspect_wheel(
        built.wheel.name,
        built.wheel.read_bytes(),
        built.cell,
        list_fatbin=built.list_fatbin,
        list_elf=built.list_elf,
    )
    assert report.problems == ()
    print(f"the fixture cell built in {built.seconds:.1f} s")


def test_cuobjdump_lists_the_shared_object_directly(built: Built, tmp_path: Path) -> None:
    shutil.unpack_archive(built.wheel, tmp_path, format="zip")
    listed = list_file(
        tmp_path / "fixture_kernels" / "libfxk.so",
        cuobjdump=built.toolchain.cuobjdump,
        env=dict(os.environ),
    )
    assert (listed.sms, listed.ptx) == (("75", "80", "86", "89", "90", "100"), ("100",))


def test_the_wheel_installs_in_a_fresh_venv_and_imports(built: Built, tmp_path: Path) -> None:
    python = installed_python(built.wheel, tmp_path / "venv")
    info = subprocess.run(
        [str(python), "-m", "fixture_kernels"], capture_output=True, text=True, check=False
    )
    assert info.returncode == 0, info.stderr
    assert f"architectures: {CELL_ARCHITECTURES}" in info.stdout
    assert "cuda: 13.0.88" in info.stdout


def labelled_matrix(tmp_path: Path, *, sms: str | None = None) -> Path:
    """The fixture's matrix with the local label cu129 (and a github destination), for
    `sms` (and no PTX) where given."""
    text = (FIXTURE / "matrix.yaml").read_text()
    text = text.replace("project: .", f"project: {FIXTURE}")
    if sms is not None:
        text = text.replace("sms: [75, 80, 86, 89, 90, 100]", f"sms: [{sms}]")
        text = text.replace("ptx: 100", "ptx: none")
    text = text.replace("destination: pypi\n", "local-label: cu129\n    destination: github\n")
    text = text.replace("  pypi:\n    kind: pypi\n", "  github: {kind: github, repository: o/f}\n")
    (tmp_path / "matrix.yaml").write_text(text)
    return tmp_path / "matrix.yaml"


def cache_beside(built: Built, tmp_path: Path) -> Path:
    """A cache directory whose toolchains are the ones the fixture was built with."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "toolchains").symlink_to(built.toolchain.plan.cache_dir, target_is_directory=True)
    return cache


def test_a_local_label_applied_by_rewriting_agrees_with_metadata(
    built: Built, tmp_path: Path
) -> None:
    matrix = load_matrix(labelled_matrix(tmp_path, sms="90"))  # the SMs are not the point
    (cell,) = matrix.cells
    assert cell.sms == (GpuTarget(90),)
    wheel, report = build_one(matrix, cell, built.settings.cache_dir, tmp_path)
    keep(wheel)
    assert wheel.name == "fixture_cmake_kernels-0.2.0+cu129-py3-none-manylinux_2_34_x86_64.whl"
    facts = read_wheel(wheel)
    assert facts.metadata_version == "0.2.0+cu129"
    assert facts.dist_info == "fixture_cmake_kernels-0.2.0+cu129.dist-info"
    assert report.ok
    python = installed_python(wheel, tmp_path / "venv")
    script = "import importlib.metadata as m; print(m.version('fixture-cmake-kernels'))"
    version = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert version == "0.2.0+cu129"


def test_the_skbuild_cmake_args_trap_builds_one_sm_and_is_caught(
    built: Built, tmp_path: Path
) -> None:
    """scikit-build-core splits SKBUILD_CMAKE_ARGS on ';': CMake gets
    -DCMAKE_CUDA_ARCHITECTURES=75-real and the rest as stray arguments, and exits 0. Built
    here, the compile wrapper stops such a build at its first compile (the tests below);
    built elsewhere from the cell's inputs (no wrapper sees the compiles), the inspection
    is the last word."""
    inputs = cell_inputs(built.cell, built.toolchain, built.settings, through_cache=False)
    env = cell_environment(inputs, base=built.settings.environ, python=sys.executable, epoch=EPOCH)
    for name in ("CUDAARCHS", "CMAKE_ARGS"):
        env.pop(name)
    architectures = inputs.config_settings["cmake.define.CMAKE_CUDA_ARCHITECTURES"]
    env["SKBUILD_CMAKE_ARGS"] = f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"
    done = proc.run(
        build_command(sys.executable, FIXTURE, tmp_path / "built"), env=env, log=tmp_path / "log"
    )
    assert done.returncode == 0, proc.tail(done.output)
    (wheel,) = (tmp_path / "built").glob("*.whl")
    report = inspect_wheel(
        built.cell.wheel_filename,
        wheel.read_bytes(),
        built.cell,
        list_fatbin=built.list_fatbin,
        list_elf=built.list_elf,
    )
    assert report.sms == ("75",)
    assert report.ptx == ()
    missing = [p for p in report.problems if "has no cubin for sm_" in p]
    assert [p.split(":")[0] for p in missing] == [
        f"fixture_kernels/libfxk.so has no cubin for sm_{sm}" for sm in (80, 86, 89, 90, 100)
    ]
    assert "fixture_kernels/libfxk.so has PTX none, the cell asks for compute_100" in (
        report.problems
    )


def variant(project: Path, tmp_path: Path, sms: str, ptx: str = "100") -> tuple[Matrix, Cell]:
    """The project's matrix with other SMs and PTX, written beside the test."""
    text = (project / "matrix.yaml").read_text()
    text = text.replace("project: .", f"project: {project}")
    text = text.replace("sms: [75, 80, 86, 89, 90, 100]", f"sms: [{sms}]")
    text = text.replace("ptx: 100", f"ptx: {ptx}")
    (tmp_path / "matrix.yaml").write_text(text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    (cell,) = matrix.cells
    return matrix, cell


def test_cmake_builds_suffixed_targets_as_90a_real_and_100f_real(
    built: Built, tmp_path: Path
) -> None:
    matrix, cell = variant(FIXTURE, tmp_path, "80, 90a, 100f")
    wheel, report = build_one(matrix, cell, built.settings.cache_dir, tmp_path)
    assert (report.sms, report.ptx) == (("80", "90a", "100f"), ("100",))
    python = installed_python(wheel, tmp_path / "venv")
    info = subprocess.run(
        [str(python), "-m", "fixture_kernels"], capture_output=True, text=True, check=True
    )
    assert "architectures: 80-real,90a-real,100f-real,100-virtual" in info.stdout


def test_an_older_manylinux_than_auditwheel_finds_is_a_clear_error(
    built: Built, tmp_path: Path
) -> None:
    text = (FIXTURE / "matrix.yaml").read_text().replace("project: .", f"project: {FIXTURE}")
    (tmp_path / "matrix.yaml").write_text(text.replace('manylinux: "2_34"', 'manylinux: "2_28"'))
    matrix = load_matrix(tmp_path / "matrix.yaml")
    (cell,) = matrix.cells
    settings, toolchain = prepared(matrix, cell, built.settings.cache_dir, tmp_path)
    failed = build_cell(cell, toolchain, settings, sources="test")
    assert not failed.ok
    assert failed.error is not None
    assert failed.error.startswith(
        "auditwheel: the wheel is only manylinux_2_34_x86_64, not manylinux_2_28_x86_64"
    )
    assert "build in a manylinux container" in failed.error
    assert list(settings.out.glob("*.whl")) == [], "a failed cell leaves no wheel in dist/"


def test_a_compile_whose_own_flags_ask_for_other_targets_stops_the_cell_at_once(
    release_cache: Path, tmp_path: Path
) -> None:
    """CUDAFLAGS with a -gencode of its own, as a project's CMAKE_CUDA_FLAGS would have:
    CMake passes it beside CMAKE_CUDA_ARCHITECTURES's, and the CUDA launcher stops the
    first compile."""
    text = (FIXTURE / "matrix.yaml").read_text().replace("project: .", f"project: {FIXTURE}")
    text = text.replace(
        "  backend: cmake ",
        '  env: {CUDAFLAGS: "-gencode=arch=compute_87,code=sm_87"}\n  backend: cmake ',
    )
    text = text.replace("sms: [75, 80, 86, 89, 90, 100]", "sms: [80]").replace(
        "ptx: 100", "ptx: 80"
    )
    (tmp_path / "matrix.yaml").write_text(text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    (cell,) = matrix.cells
    settings, toolchain = prepared(matrix, cell, release_cache, tmp_path)
    failed = build_cell(cell, toolchain, settings, sources="test")
    assert not failed.ok
    assert failed.error is not None
    said = failed.error.splitlines()
    assert "stopped at its first compile" in said[0]
    asked = said[1].split(":", 1)[1].strip()
    assert asked == "sm_80, PTX compute_80 (its sms and ptx, given to the build as " + (
        "CMAKE_CUDA_ARCHITECTURES)"
    )
    assert said[2].endswith("the project's flags ask for: sm_80, sm_87, PTX compute_80")
    assert "csrc/fxk.cu, compiled with" in said[3]
    assert "-gencode=arch=compute_87,code=sm_87" in said[3]
    assert "CMAKE_CUDA_FLAGS" in said[4]
    assert said[5].endswith("sms: [80, 87] and ptx: 80")
    assert list(settings.out.glob("*.whl")) == []


def test_a_build_that_passes_no_architectures_stops(built: Built, tmp_path: Path) -> None:
    env = built.env()
    for name in ("CUDAARCHS", "CMAKE_ARGS"):
        env.pop(name)
    done = proc.run(
        build_command(sys.executable, FIXTURE, tmp_path / "built"), env=env, log=tmp_path / "log"
    )
    assert done.returncode != 0
    assert "No GPU architectures" in done.output


def test_release_build_builds_the_fixture_matrix(
    built: Built,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pypiserver: PypiServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = cache_beside(built, tmp_path)
    code = main(
        [
            "build",
            "--matrix",
            str(FIXTURE / "matrix.yaml"),
            "--out",
            str(tmp_path / "dist"),
            "--cache-dir",
            str(cache),
        ]
    )
    assert code == 0, capsys.readouterr().err
    (entry,) = read_manifest(tmp_path / "dist" / "manifest.json").wheels
    assert entry.filename == built.cell.wheel_filename
    assert entry.sms == ("75", "80", "86", "89", "90", "100")
    assert entry.ptx == "100"
    capsys.readouterr()
    # publishing it is planned as for csrc's wheels: twine check, then one new upload
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    dist = str(tmp_path / "dist")
    publish = ["publish", "--dist", dist, "--repository-url", pypiserver.url, "--dry-run"]
    assert main([*publish, "--json"]) == 0
    (planned,) = json.loads(capsys.readouterr().out)["plan"]
    assert (planned["filename"], planned["action"]) == (entry.filename, "upload")


def test_release_env_gives_the_backends_inputs_and_records_the_wheel_relabelled(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cibuildwheel path: the cell's inputs for a build elsewhere, then its wheel (built
    without the label, as CMake builds it) checked and given the cell's label."""
    cache = cache_beside(built, tmp_path)
    cell = ["--matrix", str(labelled_matrix(tmp_path)), "--cuda", "13.0", "--arch", "x86_64"]
    common = ["env", *cell, "--cache-dir", str(cache), "--json"]
    assert main(common) == 0, capsys.readouterr().err
    document = json.loads(capsys.readouterr().out)
    assert document["backend"] == "cmake"
    architectures = CELL_ARCHITECTURES.replace(",", ";")
    assert document["inputs"]["CUDAARCHS"] == architectures
    assert document["inputs"]["CUDACXX"].endswith("/bin/nvcc")
    assert "RELEASE_SMS" not in document["inputs"]
    assert document["config_settings"]["cmake.define.CMAKE_CUDA_ARCHITECTURES"] == architectures
    dist = tmp_path / "dist"
    assert main([*common, "--record", str(built.wheel), "--dist", str(dist)]) == 0
    recorded = json.loads(capsys.readouterr().out)
    labelled = "fixture_cmake_kernels-0.2.0+cu129-py3-none-manylinux_2_34_x86_64.whl"
    assert (recorded["ok"], recorded["wheel"]) == (True, labelled)
    (entry,) = read_manifest(dist / "manifest.json").wheels
    assert entry.filename == labelled
    assert read_wheel(dist / labelled).metadata_version == "0.2.0+cu129"


def nv_fatbin_bytes(wheel: Path) -> int:
    """The size of the shared object's .nv_fatbin section: the fatbin as nvcc wrote it."""
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read("fixture_kernels/libfxk.so")
    section = ELFFile(io.BytesIO(data)).get_section_by_name(".nv_fatbin")
    assert section is not None
    return int(section.data_size)


def test_the_compress_mode_reaches_nvcc_through_cudaflags(
    release_cache: Path, tmp_path: Path
) -> None:
    sizes: dict[str, int] = {}
    device_bytes: dict[str, tuple[tuple[str, int], ...]] = {}
    for mode in ("size", "none"):
        where = tmp_path / mode
        where.mkdir()
        text = (FIXTURE / "matrix.yaml").read_text()
        text = text.replace("project: .", f"project: {FIXTURE}")
        text = text.replace("sms: [75, 80, 86, 89, 90, 100]", "sms: [80]")
        text = text.replace("ptx: 100", f"ptx: 80\n  compress-mode: {mode}")
        (where / "matrix.yaml").write_text(text)
        matrix = load_matrix(where / "matrix.yaml")
        (cell,) = matrix.cells
        assert cell.compress_mode == mode
        wheel, report = build_one(matrix, cell, release_cache, where)
        sizes[mode] = nv_fatbin_bytes(wheel)
        device_bytes[mode] = report.device_bytes
    # the same device code; nvcc's fatbinary stored it compressed only when asked to
    assert device_bytes["size"] == device_bytes["none"]
    assert sizes["none"] > 2 * sizes["size"], sizes


def test_two_checkouts_of_the_project_build_the_same_bytes(
    release_cache: Path, tmp_path: Path
) -> None:
    """The fixture's kernels hold anonymous namespaces, which nvcc names after the source's
    absolute path: a CMake cell's compiles ran as they were, and a checkout elsewhere built
    other bytes (the cache key holds no path, so a hit there served bytes its own build
    would not make). Its compiles now get the names a torch cell's get."""
    digests = []
    for where in ("first", "second/deeper"):
        project = tmp_path / where / "cmake_kernels"
        shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist"))
        matrix, cell = variant(project, project.parent, "80", ptx="none")
        wheel, _ = build_one(matrix, cell, release_cache, tmp_path / where / "out")
        digests.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
