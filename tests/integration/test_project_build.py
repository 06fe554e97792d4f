"""The cmake backend on a real scikit-build-core + CMake CUDA project (tests/fixtures/
cmake_kernels), for CUDA 13.0 x86_64 with nvcc, cmake and ninja from PyPI: the wheel's
shared object holds SASS for exactly the cell's SMs and PTX for its target, it installs in
a fresh venv and imports, a local label applied by rewriting agrees with METADATA, and
the SKBUILD_CMAKE_ARGS `;` trap (only the first SM built, exit 0) is caught.

RELEASE_FIXTURE_WHEELHOUSE=DIR keeps the built wheels in DIR (for tests/gpu/
test_fixture_cmake.py on a GPU machine).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from release import proc
from release.build.project import (
    BuildMatrix,
    ProjectBuild,
    build_in_staging,
    cell_environment,
    cell_inputs,
    inspect_project_wheel,
    load_build_matrix,
    provision_build_tools,
)
from release.cli import main
from release.inspection.certify import CellFailure, build_command
from release.inspection.devicecode import elf_lister, scan
from release.inspection.fatbin import list_file, lister
from release.matrix import Cell
from release.records.manifest import read_manifest
from release.toolchain import host_machine, provision, resolve
from release.wheelfile import read_wheel
from tests.integration.conftest import PypiServer

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "cmake_kernels"
TORCH_FIXTURE = FIXTURES / "torch_arch_list"
EPOCH = 1700000000
CELL_ARCHITECTURES = "75-real,80-real,86-real,89-real,90-real,100-real,100-virtual"


@dataclass(frozen=True)
class Built:
    loaded: BuildMatrix
    cell: Cell
    build: ProjectBuild
    wheel: Path
    seconds: float


def project_build(loaded: BuildMatrix, cell: Cell, cache: Path) -> ProjectBuild:
    if host_machine() != cell.arch:
        pytest.skip(f"the cmake backend builds {cell.arch} cells on {cell.arch} machines only")
    environ = dict(os.environ)
    plan = resolve(str(cell.cuda), cell.arch, cuda_home=None, cache_dir=cache / "toolchains")
    toolchain = provision(plan, env=environ)
    tools = provision_build_tools(cache / "toolchains", env=environ)
    return ProjectBuild(
        recipe=loaded.recipe(cell),
        toolchain=toolchain,
        tools=tools,
        environ=environ,
        epoch=EPOCH,
        jobs=2,
        list_fatbin=lister(toolchain.cuobjdump, environ),
        list_elf=elf_lister(toolchain.cuobjdump, environ),
    )


def keep(wheel: Path) -> None:
    wheelhouse = os.environ.get("RELEASE_FIXTURE_WHEELHOUSE")
    if wheelhouse:
        Path(wheelhouse).mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, Path(wheelhouse) / wheel.name)


@pytest.fixture(scope="module")
def built(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    loaded = load_build_matrix(FIXTURE / "matrix.yaml")
    (cell,) = loaded.matrix.cells
    build = project_build(loaded, cell, release_cache)
    out = tmp_path_factory.mktemp("dist")
    start = time.monotonic()
    wheel, _ = build_in_staging(cell, build, out=out, log=out / "logs" / f"{cell.id}.log")
    seconds = time.monotonic() - start
    keep(wheel)
    return Built(loaded=loaded, cell=cell, build=build, wheel=wheel, seconds=seconds)


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
    members = scan(
        built.wheel.read_bytes(), list_fatbin=built.build.list_fatbin, list_elf=built.build.list_elf
    )
    assert [(m.name, m.kind) for m in members] == [("fixture_kernels/libfxk.so", "shared object")]
    contents = members[0].contents
    assert contents.sms == ("75", "80", "86", "89", "90", "100")
    assert contents.ptx == ("100",)
    report = inspect_project_wheel(
        built.wheel.name,
        built.wheel.read_bytes(),
        built.cell,
        list_fatbin=built.build.list_fatbin,
        list_elf=built.build.list_elf,
    )
    assert report.problems == ()
    print(f"the fixture cell built in {built.seconds:.1f} s")


def test_cuobjdump_lists_the_shared_object_directly(built: Built, tmp_path: Path) -> None:
    shutil.unpack_archive(built.wheel, tmp_path, format="zip")
    listed = list_file(
        tmp_path / "fixture_kernels" / "libfxk.so",
        cuobjdump=built.build.toolchain.cuobjdump,
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


def labelled_matrix(tmp_path: Path) -> Path:
    """The fixture's matrix with the local label cu129 (and a github destination)."""
    text = (FIXTURE / "matrix.yaml").read_text()
    text = text.replace("project: .", f"project: {FIXTURE}")
    text = text.replace("destination: pypi\n", "local-label: cu129\n    destination: github\n")
    text = text.replace("  pypi:\n    kind: pypi\n", "  github: {kind: github, repository: o/f}\n")
    (tmp_path / "matrix.yaml").write_text(text)
    return tmp_path / "matrix.yaml"


def cache_beside(built: Built, tmp_path: Path) -> Path:
    """A cache directory whose toolchains are the ones the fixture was built with."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "toolchains").symlink_to(
        built.build.toolchain.plan.cache_dir, target_is_directory=True
    )
    return cache


def test_a_local_label_applied_by_rewriting_agrees_with_metadata(
    built: Built, tmp_path: Path
) -> None:
    loaded = load_build_matrix(labelled_matrix(tmp_path))
    (cell,) = loaded.matrix.cells
    build = dataclasses.replace(built.build, recipe=loaded.recipe(cell))
    wheel, report = build_in_staging(cell, build, out=tmp_path / "dist", log=tmp_path / "log")
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
    -DCMAKE_CUDA_ARCHITECTURES=75-real and the rest as stray arguments, and exits 0."""
    inputs = cell_inputs(built.cell, built.build)
    env = cell_environment(inputs, built.build)
    for name in ("CUDAARCHS", "CMAKE_ARGS"):
        env.pop(name)
    architectures = inputs.config_settings["cmake.define.CMAKE_CUDA_ARCHITECTURES"]
    env["SKBUILD_CMAKE_ARGS"] = f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"
    done = proc.run(
        build_command(sys.executable, FIXTURE, tmp_path / "built"), env=env, log=tmp_path / "log"
    )
    assert done.returncode == 0, proc.tail(done.output)
    (wheel,) = (tmp_path / "built").glob("*.whl")
    report = inspect_project_wheel(
        built.cell.wheel_filename,
        wheel.read_bytes(),
        built.cell,
        list_fatbin=built.build.list_fatbin,
        list_elf=built.build.list_elf,
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


def variant(project: Path, tmp_path: Path, sms: str, ptx: str = "100") -> tuple[BuildMatrix, Cell]:
    """The project's matrix with other SMs and PTX, written beside the test."""
    text = (project / "matrix.yaml").read_text()
    text = text.replace("project: .", f"project: {project}")
    text = text.replace("sms: [75, 80, 86, 89, 90, 100]", f"sms: [{sms}]")
    text = text.replace("ptx: 100", f"ptx: {ptx}")
    (tmp_path / "matrix.yaml").write_text(text)
    loaded = load_build_matrix(tmp_path / "matrix.yaml")
    (cell,) = loaded.matrix.cells
    return loaded, cell


def test_cmake_builds_suffixed_targets_as_90a_real_and_100f_real(
    built: Built, tmp_path: Path
) -> None:
    loaded, cell = variant(FIXTURE, tmp_path, "80, 90a, 100f")
    build = dataclasses.replace(built.build, recipe=loaded.recipe(cell))
    wheel, report = build_in_staging(cell, build, out=tmp_path / "dist", log=tmp_path / "log")
    assert (report.sms, report.ptx) == (("80", "90a", "100f"), ("100",))
    python = installed_python(wheel, tmp_path / "venv")
    info = subprocess.run(
        [str(python), "-m", "fixture_kernels"], capture_output=True, text=True, check=True
    )
    assert "architectures: 80-real,90a-real,100f-real,100-virtual" in info.stdout


@pytest.mark.parametrize(
    ("sms", "ptx", "found"),
    [
        ("75, 80, 86, 89, 90, 100", "100", ("75", "80", "86", "89", "90", "100")),
        ("80, 90a, 100f, 120", "120", ("80", "90a", "100f", "120")),
    ],
    ids=["shipped", "suffixed"],
)
def test_the_torch_backend_builds_from_torch_cuda_arch_list(
    built: Built, tmp_path: Path, sms: str, ptx: str, found: tuple[str, ...]
) -> None:
    """A setuptools project that reads TORCH_CUDA_ARCH_LIST as torch's CUDAExtension does."""
    loaded, cell = variant(TORCH_FIXTURE, tmp_path, sms, ptx)
    assert loaded.recipe(cell).backend == "torch"
    build = dataclasses.replace(built.build, recipe=loaded.recipe(cell))
    wheel, report = build_in_staging(cell, build, out=tmp_path / "dist", log=tmp_path / "log")
    assert wheel.name == f"torch_arch_fixture-0.3.0-py3-none-manylinux_2_34_{cell.arch}.whl"
    assert (report.sms, report.ptx) == (found, (ptx,))
    log = (tmp_path / "log").read_text()
    assert f"-gencode=arch=compute_{ptx},code=compute_{ptx}" in log


def test_an_older_manylinux_than_auditwheel_finds_is_a_clear_error(
    built: Built, tmp_path: Path
) -> None:
    text = (FIXTURE / "matrix.yaml").read_text().replace("project: .", f"project: {FIXTURE}")
    (tmp_path / "matrix.yaml").write_text(text.replace('manylinux: "2_34"', 'manylinux: "2_28"'))
    loaded = load_build_matrix(tmp_path / "matrix.yaml")
    (cell,) = loaded.matrix.cells
    with pytest.raises(CellFailure) as failed:
        build_in_staging(cell, built.build, out=tmp_path / "dist", log=tmp_path / "log")
    assert failed.value.error.startswith(
        "auditwheel: the wheel is only manylinux_2_34_x86_64, not manylinux_2_28_x86_64"
    )
    assert "build in a manylinux container" in failed.value.error


def test_a_build_that_passes_no_architectures_stops(built: Built, tmp_path: Path) -> None:
    inputs = cell_inputs(built.cell, built.build)
    env = cell_environment(inputs, built.build)
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
