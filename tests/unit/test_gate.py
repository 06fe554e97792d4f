"""The GPU gate's PTX-only builds of cells whose backend cannot build PTX alone."""

from __future__ import annotations

from pathlib import Path

from release.build import BuildSettings
from release.gate import build_ptx_only
from release.matrix import load_matrix
from release.matrix_model import GateRun

BUILD = Path(__file__).resolve().parents[1] / "data" / "matrix" / "build"


def test_a_torch_cell_has_no_ptx_only_build_and_its_run_says_why(tmp_path: Path) -> None:
    matrix = load_matrix(BUILD / "torch-and-cmake.yaml")
    torch = next(c for c in matrix.cells if c.id == "12.9-x86_64")
    settings = BuildSettings(matrix=matrix, cells=(), out=tmp_path, cache_dir=tmp_path / "cache")
    results = build_ptx_only([GateRun(cell=torch, build="ptx")], settings)
    result = results[torch.id]
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("torch's TORCH_CUDA_ARCH_LIST can only add PTX to an SM")
    assert not (tmp_path / "cache").exists(), "nothing is provisioned for it"
