"""The torch backend on a real CUDAExtension project (tests/fixtures/torch_ops, libtorch's
stable ABI flavour), through `release build`: real torch 2.14.1 provisioned into the
toolchain cache (never whatever the index serves), PyPI's nvcc in a CUDA_HOME assembled
with torch's CUDA headers, the wheel tagged as built (cp310-abi3), pinned to the torch it
needs, installed beside torch in a fresh venv where the project's own tests run its op on
the CPU; a quietly CPU-only build and a planted undefined c10 symbol fail the cell (exit 4)
with nothing in the manifest.

RELEASE_FIXTURE_WHEELHOUSE=DIR keeps the built wheel in DIR (for the H200 run).
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.cli import main
from release.records.manifest import read_manifest
from release.toolchain import host_machine

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_ops"
TORCH = "2.14.1"
EPOCH = "1700000000"
WHEEL = "k3_torch_ops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"

MATRIX = f"""\
project: {FIXTURE}
build:
  backend: torch
  env: {{K3_TORCH_ABI: {{abi}}, K3_TORCH_UNPINNED: "1"{{extra}}}}
defaults:
  arches: [x86_64]
  sms: [75, 80, 90, 100]
  ptx: 100
  manylinux: "2_34"
cuda:
  "13.0":
    destination: pypi
    torch: "{TORCH}"
    abi3: "3.10"
destinations:
  pypi: {{kind: pypi}}
"""


CLI = "import sys; from release.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    dist: Path


def release_build(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], extra: str = ""
) -> Run:
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    text = MATRIX.replace("{abi}", "stable").replace("{extra}", extra)
    (tmp_path / "matrix.yaml").write_text(text, encoding="utf-8")
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH
    dist = tmp_path / "dist"
    try:
        code = main(
            ["build", "--matrix", str(tmp_path / "matrix.yaml"), "--out", str(dist),
             "--cache-dir", str(cache)]
        )  # fmt: skip
    finally:
        del os.environ["SOURCE_DATE_EPOCH"]
    captured = capsys.readouterr()
    return Run(code=code, out=captured.out, err=captured.err, dist=dist)


def built_wheel(abi: str, cache: Path, where: Path) -> Path:
    """The fixture's wheel of one flavour, through `release build` in a process of its own."""
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    text = MATRIX.replace("{abi}", abi).replace("{extra}", "")
    (where / "matrix.yaml").write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", CLI,
         "build", "--matrix", str(where / "matrix.yaml"), "--out", str(where / "dist"),
         "--cache-dir", str(cache)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wheel = where / "dist" / WHEEL
    assert wheel.is_file(), sorted(p.name for p in (where / "dist").iterdir())
    kept = os.environ.get("RELEASE_FIXTURE_WHEELHOUSE")
    if kept:
        Path(kept, abi).mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, Path(kept, abi) / wheel.name)
    return wheel


@pytest.fixture(scope="module")
def built(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stable flavour's wheel (libtorch's stable ABI, TORCH_TARGET_VERSION 2.10)."""
    return built_wheel("stable", release_cache, tmp_path_factory.mktemp("torch-stable"))


@pytest.fixture(scope="module")
def built_regular(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The regular flavour's wheel (ATen and TORCH_LIBRARY: loads beside its torch only)."""
    return built_wheel("regular", release_cache, tmp_path_factory.mktemp("torch-regular"))


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.BytesParser().parsebytes(archive.read(name))


def test_the_wheel_is_tagged_as_built_and_holds_the_cells_device_code(built: Path) -> None:
    manifest = read_manifest(built.parent / "manifest.json")
    (entry,) = manifest.wheels
    assert entry.filename == WHEEL
    assert entry.cell == f"13.0-x86_64-torch{TORCH}"
    assert (entry.sms, entry.ptx) == (("75", "80", "90", "100"), "100")
    assert entry.toolchain["torch"].startswith(f"{TORCH}+cu130")
    # the shared object's device code, per target, as cuobjdump extracts it
    sizes = dict(entry.device_bytes)
    assert list(sizes) == ["sm_75", "sm_80", "sm_90", "sm_100", "ptx_100"]
    assert all(size > 1000 for size in sizes.values()), sizes


def torch_requirements(wheel: Path) -> list[str]:
    return [r for r in metadata(wheel).get_all("Requires-Dist") or [] if r.startswith("torch")]


def test_a_stable_abi_wheel_needs_torch_from_its_target_version_on(built: Path) -> None:
    # the project says a bare `torch`; the build's TORCH_TARGET_VERSION says 2.10
    assert torch_requirements(built) == ["torch>=2.10"]


def test_a_regular_abi_wheel_needs_the_torch_minor_it_was_built_against(
    built_regular: Path,
) -> None:
    assert torch_requirements(built_regular) == ["torch==2.14.*"]
    (entry,) = read_manifest(built_regular.parent / "manifest.json").wheels
    assert (entry.sms, entry.ptx) == (("75", "80", "90", "100"), "100")


def test_the_build_compiled_against_the_pinned_torch_and_the_assembled_cuda_home(
    built: Path,
) -> None:
    log = (built.parent / "logs" / f"13.0-x86_64-torch{TORCH}.log").read_text()
    assert f"against torch {TORCH}+cu130 (CUDA 13.0)" in log
    assert "/cuda-home/bin/nvcc" in log
    assert "/usr/local/cuda" not in log


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh venv with the pinned torch and pytest, shared by both flavours (torch's
    CUDA wheels are gigabytes)."""
    venv = tmp_path_factory.mktemp("torch-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"torch=={TORCH}", "pytest"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    return python


@pytest.mark.parametrize("flavour", ["built", "built_regular"])
def test_installed_beside_torch_its_own_tests_run_the_op_on_the_cpu(
    flavour: str, request: pytest.FixtureRequest, torch_venv: str, tmp_path: Path
) -> None:
    built: Path = request.getfixturevalue(flavour)
    python = torch_venv
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--force-reinstall", str(built)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    # the wheel's torch requirement accepts the torch it was built against
    checked = subprocess.run(
        [python, "-m", "pip", "check"], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout
    tests = tmp_path / "tests"
    shutil.copytree(FIXTURE / "tests", tests)
    ran = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert " passed" in ran.stdout
    assert "test_matches_torch[float32-cpu] SKIPPED" not in ran.stdout


def test_a_cpu_only_build_fails_the_cell_and_says_why(
    built: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = release_build(tmp_path, release_cache, capsys, extra=", K3_TORCH_CPU_ONLY_IF_NO_GPU: '1'")
    assert run.code == 4
    assert "the wheel holds no device code" in run.out + run.err
    assert "torch.cuda.is_available()" in run.out + run.err
    assert read_manifest(run.dist / "manifest.json").wheels == ()
    assert not list(run.dist.glob("*.whl"))


def test_a_planted_undefined_torch_symbol_fails_the_abi_check(
    built: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = release_build(tmp_path, release_cache, capsys, extra=", K3_TORCH_PLANT_MISMATCH: '1'")
    assert run.code == 4
    said = run.out + run.err
    assert "ABI check" in said
    assert "c10::k3_planted_missing_symbol(int)" in said
    assert f"not exported by torch {TORCH}" in said
    assert not list(run.dist.glob("*.whl"))


def test_an_abi3_wheel_outside_the_limited_api_and_torchs_stable_surface_names_both(
    built: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stable flavour (abi3: "3.10") with a c10 symbol and two CPython functions of
    the full API planted: one failure of the cell, naming the ABI check's symbol and each
    CPython symbol with the version that added it to the limited API."""
    extra = ", K3_TORCH_PLANT_MISMATCH: '1', K3_TORCH_PLANT_PYAPI: '1'"
    run = release_build(tmp_path, release_cache, capsys, extra=extra)
    assert run.code == 4
    (failed,) = [line for line in (run.out + run.err).splitlines() if line.startswith("FAILED")]
    assert "ABI check: " in failed
    assert "c10::k3_planted_missing_symbol(int)" in failed
    assert "abi3audit: _C.abi3.so: PyFrame_GetBack is not in the limited API" in failed
    assert "PyType_GetName joined the limited API in Python 3.11" in failed
    assert "after the cell's abi3 floor 3.10" in failed
    assert not list(run.dist.glob("*.whl"))


def test_an_abi3_wheel_outside_the_limited_api_fails_the_inspection(
    built: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = release_build(tmp_path, release_cache, capsys, extra=", K3_TORCH_PLANT_PYAPI: '1'")
    assert run.code == 4
    (failed,) = [line for line in (run.out + run.err).splitlines() if line.startswith("FAILED")]
    assert "inspection failed: abi3audit: _C.abi3.so: PyFrame_GetBack" in failed
    assert "PyType_GetName joined the limited API in Python 3.11" in failed
    assert "ABI check" not in failed
    assert not list(run.dist.glob("*.whl"))


def test_the_regular_wheel_comes_out_the_same_from_another_checkout(
    built_regular: Path, release_cache: Path, tmp_path: Path
) -> None:
    """`--compare`: the fixture copied elsewhere, built again from empty device and wheel
    caches, gives the wheel's exact bytes; the build writes nothing into the checkout."""
    copy = tmp_path / "another" / "checkout"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    text = MATRIX.replace(str(FIXTURE), str(copy)).replace("{abi}", "regular")
    (tmp_path / "matrix.yaml").write_text(text.replace("{extra}", ""), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", CLI,
         "build", "--matrix", str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "again"),
         "--cache-dir", str(release_cache),
         "--compare", str(built_regular.parent / "manifest.json")],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "result: identical" in done.stdout + done.stderr
    assert (tmp_path / "again" / WHEEL).read_bytes() == built_regular.read_bytes()
    written = {p.relative_to(copy) for p in copy.rglob("*")} - {
        p.relative_to(FIXTURE) for p in FIXTURE.rglob("*") if "egg-info" not in str(p)
    }
    assert written == set()


GATE_PROBE = """\
import pathlib, sys
import pytest, torch
import k3_torch_ops
pinned, tests = sys.argv[1], sys.argv[2]
assert torch.__version__.split("+")[0] == pinned, torch.__version__
here = pathlib.Path(k3_torch_ops.__file__).resolve()
assert pathlib.Path(sys.prefix) in here.parents, f"{here} is not the venv's wheel"
print(f"probe: torch {torch.__version__} from {pathlib.Path(torch.__file__).parent}")
print(f"probe: {here}")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", tests]))
"""


def test_the_gpu_gate_runs_the_projects_own_tests_beside_the_pinned_torch(
    built_regular: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a GPU the CUDA tests skip; what this shows is where the command runs: a venv
    (its `python` first on PATH) holding the installed wheel beside the cell's torch."""
    shutil.copytree(FIXTURE / "tests", tmp_path / "tests")
    (tmp_path / "probe.py").write_text(GATE_PROBE, encoding="utf-8")
    gate = (
        "gpu-gate:\n"
        "  runners: [{labels: [self-hosted, h200], sms: [90]}]\n"
        # as a project's gate installs its test requirements, then runs its tests
        "  command: >-\n"
        "    sh -c 'python -m pip install --quiet --disable-pip-version-check pytest\n"
        f"    && python {tmp_path / 'probe.py'} {{torch}} {tmp_path / 'tests'}'\n"
    )
    text = MATRIX.replace("{abi}", "regular").replace("{extra}", "")
    (tmp_path / "matrix.yaml").write_text(text + gate, encoding="utf-8")
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH
    try:
        code = main(
            ["gpu-gate", "--matrix", str(tmp_path / "matrix.yaml"), "--runner",
             "self-hosted/h200", "--dist", str(built_regular.parent),
             "--cache-dir", str(release_cache), "--json"]
        )  # fmt: skip
    finally:
        del os.environ["SOURCE_DATE_EPOCH"]
    captured = capsys.readouterr()
    assert code == 0, captured.err[-4000:]
    runs = json.loads(captured.out)["runs"]
    assert [(r["build"], r["ok"]) for r in runs] == [("cubin", True), ("ptx", True)]
    assert "probe: torch 2.14.1+cu130 from " in captured.err
    assert " passed" in captured.err


def test_a_compile_killed_for_memory_is_said_so_with_the_remedy(
    built: Path, release_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """g++ itself, told (-wrapper) to run its compiler through a program that dies of
    SIGKILL, as the OOM killer's victims do: the cell fails naming memory and fewer jobs,
    not as a compiler error."""
    killer = tmp_path / "oom-killed.sh"
    killer.write_text("#!/bin/sh\nkill -9 $$\n", encoding="utf-8")
    killer.chmod(0o755)
    run = release_build(tmp_path, release_cache, capsys, extra=f', CPPFLAGS: "-wrapper {killer}"')
    assert run.code == 4
    said = run.out + run.err
    assert "Killed signal terminated program" in said
    assert "a compile was killed, most likely for memory" in said
    assert "--compile-jobs" in said
    assert not list(run.dist.glob("*.whl"))
