"""The GPU gate's PTX-only builds of cells whose backend cannot build PTX alone."""

from __future__ import annotations

from pathlib import Path

from release.backends import targets_problem
from release.backends.torch_extension import torch_arch_list
from release.matrix import GateRun, load_matrix
from release.targets import GpuTarget

BUILD = Path(__file__).resolve().parents[1] / "data" / "matrix" / "build"


def test_a_torch_cells_oldest_sm_run_keeps_that_cubin_beside_its_ptx() -> None:
    """torch's arch list cannot name PTX alone: the run builds `7.5+PTX` (the cubin cannot
    load on a newer major, so the PTX runs), and that cell passes the matrix's torch rule."""
    matrix = load_matrix(BUILD / "torch-and-cmake.yaml")
    for cell in matrix.cells:
        run = GateRun(cell=cell, build="ptx")
        built = run.built_cell
        lowest = min(t.number for t in (*cell.sms, *((cell.ptx,) if cell.ptx else ())))
        assert built.ptx == GpuTarget(lowest)
        if cell.build.backend == "torch":
            assert built.sms == (GpuTarget(lowest),)
            assert torch_arch_list(built.sms, built.ptx) == f"{lowest // 10}.{lowest % 10}+PTX"
        else:
            assert built.sms == ()
        assert targets_problem(built.build.backend, built.sms, built.ptx) is None
