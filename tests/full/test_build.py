"""`release build` on real cells: real compilers from PyPI, real wheels, real inspection.

Slow: the session's cold build of the shipped matrix (`shipped_build`: it provisions the
toolchains and compiles the device code of both CUDA versions) is what most tests read; the
ones that build again do it with a copy of its cache (`warm_cache`), for one SM where the
SM list is not what they check.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from release import proc
from release.building.excluded import weight
from release.building.pipeline import build_command, cell_environment, cell_inputs
from release.building.settings import BuildSettings
from release.building.stage import plan_toolchains, provision_all
from release.cli import main
from release.inspection.verdict import fatbin_lister
from release.inspection.wheel import inspect_wheel
from release.matrix import load_matrix
from release.records.manifest import read_manifest
from release.targets import GpuTarget
from tests.full.shared_builds import ShippedBuild
from tests.integration.interface import EPOCH

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "csrc"


def device_actions(dist: Path) -> list[dict[str, object]]:
    log = dist / "logs" / "device.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def warm_cache(shipped_build: ShippedBuild, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped build's cache, for the tests that build into it."""
    return shipped_build.cache_copy(tmp_path_factory.mktemp("warm") / "cache")


def test_all_four_cells_build_and_are_in_the_manifest(shipped_build: ShippedBuild) -> None:
    assert shipped_build.code == 0, shipped_build.stderr
    manifest = read_manifest(shipped_build.dist / "manifest.json")
    matrix = load_matrix(REPO / "matrix.yaml")
    assert sorted(w.filename for w in manifest.wheels) == sorted(
        c.wheel_filename for c in matrix.cells
    )
    for entry in manifest.wheels:
        wheel = shipped_build.dist / entry.filename
        assert wheel.stat().st_size == entry.size
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry.sha256
        assert entry.sms == ("75", "80", "86", "89", "90", "100")
        assert entry.ptx == "100"
        # cuobjdump's extraction, summed over the wheel's fatbins
        sizes = dict(entry.device_bytes)
        assert list(sizes) == [*(f"sm_{sm}" for sm in entry.sms), "ptx_100"]
        assert all(size > 1000 for size in sizes.values()), sizes
    assert sorted(manifest.nccl_files) == [
        "cu12-constraints.txt",
        "cu12-reinstall.txt",
        "cu12.txt",
        "cu13-constraints.txt",
        "cu13-reinstall.txt",
        "cu13.txt",
    ]
    assert (
        (shipped_build.dist / "cu12.txt").read_text().strip().endswith("nvidia-nccl-cu12==2.30.7")
    )


def test_device_code_is_compiled_once_per_cuda_version(shipped_build: ShippedBuild) -> None:
    actions = device_actions(shipped_build.dist)
    assert {a["action"] for a in actions} <= {"compile", "cached"}
    compiled = Counter(
        (a["compiler"], a["kernel"], a["target"]) for a in actions if a["action"] == "compile"
    )
    assert [key for key, count in compiled.items() if count > 1] == []
    compilers = {a["compiler"] for a in actions}
    assert len(compilers) == 2, "one device compiler per CUDA version"
    # four cells, each reporting all 2 kernels x 7 targets; from an empty device cache,
    # every one compiled exactly once
    assert len(actions) == 4 * 2 * 7
    assert len(compiled) == 2 * 2 * 7


@pytest.mark.parametrize("cuda", ["13.0", "12.9"])
def test_x86_64_wheel_installs_in_a_fresh_venv_and_reports_its_sms(
    shipped_build: ShippedBuild, cuda: str, tmp_path: Path
) -> None:
    manifest = read_manifest(shipped_build.dist / "manifest.json")
    entry = next(w for w in manifest.wheels if w.cuda == cuda and w.arch == "x86_64")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-index",
            "--quiet",
            str(shipped_build.dist / entry.filename),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    info = subprocess.run(
        [str(python), "-m", "k3_kernels", "info"], capture_output=True, text=True, check=False
    )
    assert info.returncode == 0, info.stderr
    assert f"CUDA {cuda}" in info.stdout
    for sm in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "compute_100"):
        assert sm in info.stdout
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('k3-kernels'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version == entry.version


@pytest.mark.parametrize("cuda", ["13.0", "12.9"])
def test_aarch64_wheel_library_is_aarch64(shipped_build: ShippedBuild, cuda: str) -> None:
    manifest = read_manifest(shipped_build.dist / "manifest.json")
    entry = next(w for w in manifest.wheels if w.cuda == cuda and w.arch == "aarch64")
    with zipfile.ZipFile(shipped_build.dist / entry.filename) as archive:
        libraries = [n for n in archive.namelist() if n.endswith(".so")]
        assert libraries
        for name in libraries:
            elf = ELFFile(io.BytesIO(archive.read(name)))
            assert elf.header["e_machine"] == "EM_AARCH64"


def test_warm_rebuild_compiles_nothing(
    warm_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)  # the shipped build's
    out = tmp_path / "dist"
    code = main(
        [
            "build",
            "--matrix",
            str(REPO / "matrix.yaml"),
            "--out",
            str(out),
            "--cache-dir",
            str(warm_cache),
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [c["cached"] for c in report["cells"]] == [True] * 4
    assert [a for a in device_actions(out) if a["action"] == "compile"] == []


def copy_project(tmp_path: Path, matrix_text: str) -> Path:
    shutil.copytree(
        CSRC, tmp_path / "csrc", ignore=shutil.ignore_patterns("build", "dist", "__pycache__")
    )
    (tmp_path / "matrix.yaml").write_text(matrix_text)
    return tmp_path / "matrix.yaml"


ONE_CELL = """
project: csrc
defaults: {arches: [x86_64], sms: [90], ptx: none, manylinux: "2_28"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""


def test_one_kernel_changed_recompiles_only_that_kernel(
    warm_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = copy_project(tmp_path, ONE_CELL)
    swiglu = tmp_path / "csrc" / "kernels" / "swiglu.cu"
    # unique, so that a device cache kept between test runs has never seen this source
    swiglu.write_text(swiglu.read_text() + f"\n// a change to one kernel file: {uuid.uuid4()}\n")
    out = tmp_path / "dist"
    code = main(
        ["build", "--matrix", str(matrix), "--out", str(out), "--cache-dir", str(warm_cache)]
    )
    assert code == 0, capsys.readouterr().err
    compiled = {a["kernel"] for a in device_actions(out) if a["action"] == "compile"}
    cached = {a["kernel"] for a in device_actions(out) if a["action"] == "cached"}
    assert compiled == {"swiglu"}
    assert "mla_kv_cache" in cached


def test_a_wheel_missing_one_sm_fails_inspection(warm_cache: Path, tmp_path: Path) -> None:
    """Build a real wheel whose fatbins lack sm_89 while the cell asks for it."""
    matrix = load_matrix(REPO / "matrix.yaml")
    cell = next(c for c in matrix.cells if c.id == "13.0-x86_64")
    settings = BuildSettings(matrix=matrix, cells=(cell,), out=tmp_path, cache_dir=warm_cache)
    toolchain = provision_all(plan_toolchains(settings), sys.executable, dict(os.environ))[cell.id]
    inputs = cell_inputs(cell, toolchain, settings)
    env = cell_environment(inputs, base=dict(os.environ), python=sys.executable, epoch=1)
    env["RELEASE_SMS"] = "75;80;86;90;100"
    result = proc.run(build_command(sys.executable, CSRC, tmp_path / "out"), env=env)
    assert result.returncode == 0, result.output
    (wheel,) = (tmp_path / "out").glob("*.whl")
    report = inspect_wheel(
        cell.wheel_filename,
        wheel.read_bytes(),
        cell,
        list_fatbin=fatbin_lister(toolchain, dict(os.environ)),
    )
    assert not report.ok
    missing = [p for p in report.problems if "no cubin for sm_89" in p]
    assert len(missing) == 2, report.problems  # one per kernel fatbin
    assert "89" not in report.sms


BROKEN_ON_SM86 = """
project: csrc
defaults: {arches: [x86_64, aarch64], sms: [80, 86], ptx: 86, manylinux: "2_28"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
exclude:
  - {arch: aarch64, sm: 86}
"""


def test_a_failed_cell_shows_its_log_and_the_others_finish(
    warm_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = copy_project(tmp_path, BROKEN_ON_SM86.replace("ptx: 86", "ptx: 90"))
    swiglu = tmp_path / "csrc" / "kernels" / "swiglu.cu"
    swiglu.write_text(
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 860\n"
        "#error swiglu does not compile for sm_86\n#endif\n" + swiglu.read_text()
    )
    out = tmp_path / "dist"
    code = main(
        ["build", "--matrix", str(matrix), "--out", str(out), "--cache-dir", str(warm_cache)]
    )
    err = capsys.readouterr().err
    assert code == 4
    assert "FAILED 13.0-x86_64" in err
    assert "swiglu does not compile for sm_86" in err
    assert "reproduce: " in err
    assert "Traceback" not in err
    manifest = read_manifest(out / "manifest.json")
    assert [w.cell for w in manifest.wheels] == ["13.0-aarch64"]
    assert not list(out.glob("*x86_64.whl"))


def test_fail_fast_stops_at_the_first_failed_cell(
    warm_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = copy_project(tmp_path, BROKEN_ON_SM86.replace("ptx: 86", "ptx: 90"))
    swiglu = tmp_path / "csrc" / "kernels" / "swiglu.cu"
    swiglu.write_text(
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 860\n#error broken\n#endif\n"
        + swiglu.read_text()
    )
    out = tmp_path / "dist"
    code = main(
        [
            "build",
            "--matrix",
            str(matrix),
            "--out",
            str(out),
            "--cache-dir",
            str(warm_cache),
            "--fail-fast",
        ]
    )
    err = capsys.readouterr().err
    assert code == 4
    assert "1 of 2 cells failed (13.0-x86_64); 1 not started" in err
    assert not list(out.glob("*.whl"))


def test_dry_run_shows_cells_toolchains_and_commands_and_builds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dist"
    cache = tmp_path / "cache"
    code = main(
        [
            "build",
            "--matrix",
            str(REPO / "matrix.yaml"),
            "--out",
            str(out),
            "--cache-dir",
            str(cache),
            "--dry-run",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    for cell in load_matrix(REPO / "matrix.yaml").cells:
        assert cell.wheel_filename in printed
        assert f"RELEASE_TARGET_ARCH={cell.arch}" in printed
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in printed
    assert "RELEASE_SMS='75;80;86;89;90;100'" in printed
    assert "-m build --wheel" in printed
    assert not out.exists()
    assert not cache.exists(), "a dry run provisions nothing"


RECORD_RUN = """
import shutil, sys
from pathlib import Path
wheel, expect = sys.argv[1], sys.argv[2]
runs = Path(sys.argv[3])
runs.mkdir(exist_ok=True)
n = len(list(runs.iterdir()))
shutil.copy(wheel, runs / f"{n}-{expect or 'cubin'}.whl")
sys.exit(1 if expect and "fail-ptx" in sys.argv[4:] else 0)
"""


def gate_matrix(tmp_path: Path, command: str) -> Path:
    text = (REPO / "matrix.yaml").read_text().replace("project: csrc", f"project: {CSRC}")
    gate = (
        "\ngpu-gate:\n"
        "  runners:\n"
        "    - {labels: [self-hosted, h200], sms: [90]}\n"
        f"  command: {json.dumps(command)}\n"
    )
    path = tmp_path / "matrix.yaml"
    path.write_text(text + gate)
    return path


def test_the_gpu_gate_runs_the_command_on_each_wheel_and_a_ptx_only_build(
    shipped_build: ShippedBuild,
    warm_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = tmp_path / "record run.py"  # a space: {wheel} and paths stay one word each
    script.write_text(RECORD_RUN)
    runs = tmp_path / "runs"
    matrix = gate_matrix(tmp_path, f"{sys.executable} '{script}' {{wheel}} {{expect_arch}} {runs}")
    args = ["gpu-gate", "--matrix", str(matrix), "--runner", "self-hosted/h200"]
    args += ["--dist", str(shipped_build.dist), "--cache-dir", str(warm_cache), "--cuda", "13.0"]
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert [(r["cell"], r["build"], r["expect_arch"], r["ok"]) for r in report["runs"]] == [
        ("13.0-x86_64", "cubin", "", True),
        ("13.0-x86_64", "ptx", "750", True),
    ]
    cubin, ptx = sorted(runs.iterdir())
    assert cubin.name == "0-cubin.whl"
    assert cubin.read_bytes() == (shipped_build.dist / cubin_name(shipped_build)).read_bytes()
    cell = next(c for c in load_matrix(matrix).cells if c.id == "13.0-x86_64")
    settings = BuildSettings(
        matrix=load_matrix(matrix), cells=(cell,), out=tmp_path, cache_dir=warm_cache
    )
    toolchain = provision_all(plan_toolchains(settings), sys.executable, dict(os.environ))[cell.id]
    lister = fatbin_lister(toolchain, dict(os.environ))
    ptx_cell = replace(cell, sms=(), ptx=GpuTarget(75))
    report_ptx = inspect_wheel(cell.wheel_filename, ptx.read_bytes(), ptx_cell, list_fatbin=lister)
    assert report_ptx.ok, report_ptx.problems
    assert report_ptx.sms == ()
    assert report_ptx.ptx == ("75",)
    # The same wheel is no PTX-only wheel: the check above can fail.
    assert not inspect_wheel(
        cell.wheel_filename, cubin.read_bytes(), ptx_cell, list_fatbin=lister
    ).ok

    matrix = gate_matrix(
        tmp_path, f"{sys.executable} '{script}' {{wheel}} {{expect_arch}} {runs} fail-ptx"
    )
    code = main(["gpu-gate", "--matrix", str(matrix), *args[3:]])
    err = capsys.readouterr().err
    assert code == 4
    assert "the GPU gate failed on self-hosted/h200: 13.0-x86_64 ptx (compute_75): exit 1" in err
    assert "Traceback" not in err


def cubin_name(shipped_build: ShippedBuild) -> str:
    return next(
        w.filename
        for w in read_manifest(shipped_build.dist / "manifest.json").wheels
        if w.cell == "13.0-x86_64"
    )


def test_every_wheel_passes_twine_check_strict_and_check_wheel_contents(
    shipped_build: ShippedBuild,
) -> None:
    wheels = sorted(str(w) for w in shipped_build.dist.glob("*.whl"))
    assert len(wheels) == 4
    bin_dir = Path(sys.executable).parent
    for tool in (["twine", "check", "--strict"], ["check-wheel-contents"]):
        done = subprocess.run(
            [str(bin_dir / tool[0]), *tool[1:], *wheels],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "WARNING" not in done.stdout + done.stderr


SIZE_LEVERS = """
project: csrc
defaults:
  arches: [x86_64, aarch64]
  sms: [75, 80]
  ptx: none
  manylinux: "2_28"
  compress-mode: {mode}
cuda:
  "13.0": {{destination: pypi}}
destinations:
  pypi: {{kind: pypi}}
exclude:
  - {{arch: aarch64, sm: 75}}
"""


def fatbin_bytes(wheel: Path) -> int:
    """The fatbins' own bytes in the wheel (as nvcc's fatbinary compressed them)."""
    with zipfile.ZipFile(wheel) as archive:
        return sum(i.file_size for i in archive.infolist() if i.filename.endswith(".fatbin"))


def test_compress_mode_reaches_the_fatbins_and_an_exclusion_is_weighed_in_its_sibling(
    release_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: dict[str, dict[str, dict[str, object]]] = {}
    for mode in ("size", "none"):
        summary = tmp_path / f"summary-{mode}.md"
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        matrix = copy_project(tmp_path / mode, SIZE_LEVERS.format(mode=mode))
        out = tmp_path / mode / "dist"
        argv = ["build", "--matrix", str(matrix), "--out", str(out), "--json"]
        code = main([*argv, "--cache-dir", str(release_cache)])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        built[mode] = {c["cell"]: c for c in json.loads(captured.out)["cells"]}
        x86_64, aarch64 = built[mode]["13.0-x86_64"], built[mode]["13.0-aarch64"]
        sm_75 = dict(x86_64["device_bytes"])["sm_75"]  # type: ignore[call-overload]
        assert aarch64["excluded"] == [
            {"sm": "75", "sibling": "13.0-x86_64", "sibling_bytes": sm_75}
        ]
        assert "excluded" not in x86_64
        assert list(aarch64["device_bytes"]) == ["sm_80"]  # type: ignore[call-overload]
        line = (
            f"13.0-aarch64: sm_75 excluded (its device code weighs {weight(sm_75)} in 13.0-x86_64)"
        )
        assert line in captured.err.splitlines()
        assert f"- {line}" in summary.read_text().splitlines()
    for cell in ("13.0-x86_64", "13.0-aarch64"):
        size, none = built["size"][cell], built["none"][cell]
        # the same device code, uncompressed; only how the fatbins hold it differs
        assert size["device_bytes"] == none["device_bytes"]
        compressed = fatbin_bytes(tmp_path / "size" / "dist" / str(size["wheel"]))
        uncompressed = fatbin_bytes(tmp_path / "none" / "dist" / str(none["wheel"]))
        assert uncompressed > 2 * compressed, (cell, compressed, uncompressed)
