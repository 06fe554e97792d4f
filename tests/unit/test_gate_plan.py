"""release.building.gate's plan from dist/: which wheel each run tests, or why none. The
manifest is another job's output: a run takes only a wheel its cell's build makes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from release.building.gate import gate_plan
from release.matrix import Cell, Matrix, load_matrix
from release.records.manifest import Manifest, WheelEntry

PROJECT = Path(__file__).parent.parent / "data" / "matrix" / "project"
MATRIX = f"""project: {PROJECT}
build: {{backend: cmake}}
defaults: {{arches: [x86_64, aarch64], manylinux: "2_28", device-code: none}}
cuda:
  "13.0": {{destination: pypi}}
destinations:
  pypi: {{kind: pypi}}
gpu-gate:
  runners: [{{labels: [gpu], sms: [90]}}]
  command: sh -c 'pytest {{wheel}}'
"""


def matrix(tmp_path: Path) -> Matrix:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    return load_matrix(path)


def entry(cell: Cell, filename: str, dist: Path) -> WheelEntry:
    data = b"wheel bytes"
    (dist / filename).write_bytes(data)
    return WheelEntry.of(
        cell, filename=filename, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        sms=(), ptx=None, toolchain={},
    )  # fmt: skip


def problems(loaded: Matrix, dist: Path, *entries: WheelEntry) -> list[str | None]:
    gate = loaded.gpu_gate
    assert gate is not None
    manifest = Manifest(project="k3-kernels", version="0.1.0", wheels=entries)
    steps = gate_plan(gate, gate.runners[0], loaded.cells, manifest=manifest, dist=dist)
    return [step.problem for step in steps]


def test_a_cell_of_a_wheel_as_built_is_planned(tmp_path: Path) -> None:
    loaded = matrix(tmp_path)
    x86 = next(c for c in loaded.cells if c.arch == "x86_64")
    assert problems(loaded, tmp_path, entry(x86, x86.wheel_filename, tmp_path)) == [None]


def test_a_cell_whose_wheel_the_dist_lacks_is_a_run_that_cannot_be_made(tmp_path: Path) -> None:
    """The dry run planned it (exit 0); only the run found no wheel (exit 4)."""
    assert problems(matrix(tmp_path), tmp_path) == [
        "the dist's manifest records no wheel of 13.0-x86_64: build it first"
    ]


def test_a_wheel_of_another_arch_recorded_under_the_cell_is_not_tested_as_its(
    tmp_path: Path,
) -> None:
    """An aarch64 wheel recorded under the x86_64 cell was tested on the x86_64 runner."""
    loaded = matrix(tmp_path)
    x86, arm = sorted(loaded.cells, key=lambda c: c.arch != "x86_64")
    assert problems(loaded, tmp_path, entry(x86, arm.wheel_filename, tmp_path)) == [
        "the dist's manifest records no wheel of 13.0-x86_64: build it first"
    ]


def gated(tmp_path: Path, cell_targets: str, runner_sms: str, backend: str = "cmake") -> Matrix:
    text = (
        MATRIX.replace("sms: [90]}", f"sms: {runner_sms}}}")
        .replace("device-code: none", cell_targets)
        .replace("backend: cmake", f"backend: {backend}")
    )
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return load_matrix(path)


def runnable(loaded: Matrix, tmp_path: Path) -> dict[str, str | None]:
    """Each x86_64 run's problem, by its name."""
    gate = loaded.gpu_gate
    assert gate is not None
    entries = [entry(c, c.wheel_filename, tmp_path) for c in loaded.cells]
    manifest = Manifest(project="k3-kernels", version="0.1.0", wheels=tuple(entries))
    steps = gate_plan(gate, gate.runners[0], loaded.cells, manifest=manifest, dist=tmp_path)
    return {step.name: step.problem for step in steps}


def test_a_run_whose_code_the_runners_gpu_cannot_run_cannot_be_made(tmp_path: Path) -> None:
    """sm_100 cubins and compute_100 PTX on an SM 90 runner were planned, and failed only
    once the tests ran (after the PTX-only build); the PTX-only build of compute_90 runs."""
    loaded = gated(tmp_path, "sms: [90, 100], ptx: 100", "[90]")
    assert runnable(loaded, tmp_path) == {
        "13.0-x86_64 cubin": None,
        "13.0-x86_64 ptx (compute_90)": None,
    }
    loaded = gated(tmp_path, "sms: [100], ptx: 100", "[90]")
    problems = runnable(loaded, tmp_path)
    assert list(problems) == ["13.0-x86_64 cubin", "13.0-x86_64 ptx (compute_100)"]
    assert problems["13.0-x86_64 cubin"] == (
        "a GPU of SM 90 runs none of its code (sm_100, compute_100): give the runner a GPU "
        "the cell builds for, or the cell an SM or PTX target this GPU runs"
    )
    assert problems["13.0-x86_64 ptx (compute_100)"] is not None


def test_a_cubin_runs_on_its_major_at_or_above_its_sm_and_ptx_on_any_gpu_above(
    tmp_path: Path,
) -> None:
    """An sm_80 cubin runs on SM 86, not on SM 90; an sm_90a cubin on SM 90 only; PTX of
    compute_80 on SM 100; a runner of two SMs needs code for each."""
    planned = {
        ("sms: [80], ptx: none", "[86]"): True,
        ("sms: [80], ptx: none", "[90]"): False,
        ("sms: [90a], ptx: none", "[90]"): True,
        ("sms: [90a], ptx: none", "[100]"): False,
        ("sms: [80], ptx: 80", "[100]"): True,
        ("sms: [90], ptx: none", "[90, 100]"): False,
        ("sms: [90, 100], ptx: none", "[90, 100]"): True,
    }
    for (targets, sms), expected in planned.items():
        cubin = runnable(gated(tmp_path, targets, sms), tmp_path)["13.0-x86_64 cubin"]
        assert (cubin is None) is expected, (targets, sms, cubin)


def test_a_cell_without_device_code_runs_on_any_gpu(tmp_path: Path) -> None:
    loaded = gated(tmp_path, "device-code: none", "[75]")
    assert runnable(loaded, tmp_path) == {"13.0-x86_64 cubin": None}
