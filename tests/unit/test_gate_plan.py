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
