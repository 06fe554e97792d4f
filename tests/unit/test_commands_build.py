"""release.commands.build: the line `release build` prints for a built cell says what device
code its wheel holds, and for a cell of device-code: none that it holds none, and names each
copy its wheel was relabelled for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from release.building.settings import CellResult, CopiedWheel
from release.commands.build import _describe
from release.inspection.wheel import WheelReport
from release.matrix import load_matrix

DATA = Path(__file__).parent.parent / "data" / "matrix"


def test_a_cell_without_device_code_says_so_instead_of_empty_sm_lists() -> None:
    (cell,) = load_matrix(DATA / "build" / "torch-jit.yaml").cells
    assert cell.host_only
    name = cell.wheel_filename
    report = WheelReport(filename=name, size=46985, sha256="0" * 64, sms=(), ptx=())
    line = _describe(CellResult(cell=cell, ok=True, seconds=8.6, report=report))
    assert line == f"ok {cell.id} built in 8.6 s: {name} (0.04 MiB; no device code)"


def test_a_cell_with_device_code_names_its_sms_and_ptx() -> None:
    cell = next(c for c in load_matrix(DATA / "good" / "shipped-shape.yaml").cells)
    name = cell.wheel_filename
    report = WheelReport(filename=name, size=2**20, sha256="0" * 64, sms=("80", "90"), ptx=())
    line = _describe(CellResult(cell=cell, ok=True, seconds=1.0, report=report))
    assert line == f"ok {cell.id} built in 1.0 s: {name} (1.00 MiB; sm 80 90; ptx -)"


def test_a_cell_published_to_several_places_names_each_relabelled_copy() -> None:
    cell = load_matrix(DATA / "good" / "sgl-layout.yaml").cells[0]
    name = cell.wheel_filename
    report = WheelReport(filename=name, size=2**20, sha256="0" * 64, sms=("90", "100"), ptx=())
    seen = cell.as_copy(cell.relabelled[0])
    copy = CopiedWheel(cell=seen, report=replace(report, filename=seen.wheel_filename))
    line = _describe(CellResult(cell=cell, ok=True, seconds=1.0, report=report, copies=(copy,)))
    assert line == (
        f"ok {cell.id} built in 1.0 s: {name} (1.00 MiB; sm 90 100; ptx -)\n"
        "   relabelled for whl: k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
    )
