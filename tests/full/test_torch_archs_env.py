"""A torch extension whose setup.py makes its -gencode flags from a variable of its own
(tests/fixtures/torch_archs_env: K3_CUDA_ARCHS, default 80;90, PTX for the highest SM), as
flash-attention's does from FLASH_ATTN_CUDA_ARCHS. With matrix.yaml's `targets-env` the
cell's SMs reach it and the wheel holds exactly them, the project's setup.py unchanged;
without, the project's default list is built and the cell stops at its first compile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.records.manifest import read_manifest
from release.toolchain import host_machine
from tests.full.test_torch_archflags import fresh_caches
from tests.integration.test_archflags_preview import CLI, TORCH

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_archs_env"
MATRIX = f"""\
project: {FIXTURE}
build:
  backend: torch
  TARGETS
defaults: {{arches: [x86_64], sms: [80, 100], ptx: 100, manylinux: "2_34"}}
cuda:
  "13.0": {{destination: pypi, torch: "{TORCH}", abi3: "3.10"}}
destinations:
  pypi: {{kind: pypi}}
"""


def build(tmp_path: Path, release_cache: Path, targets: str) -> tuple[int, str, Path]:
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.replace("TARGETS", targets), encoding="utf-8")
    dist = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-c", CLI, "build", "--matrix", str(matrix), "--out", str(dist),
         "--cache-dir", str(fresh_caches(tmp_path, release_cache))],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, dist


def test_the_cells_sms_reach_the_projects_own_variable_and_the_wheel_holds_them(
    release_cache: Path, tmp_path: Path
) -> None:
    code, said, dist = build(tmp_path, release_cache, "targets-env: {K3_CUDA_ARCHS: sms}")
    assert code == 0, said[-3000:]
    (entry,) = read_manifest(dist / "manifest.json").wheels
    assert (entry.sms, entry.ptx) == (("80", "100"), "100")
    assert [label for label, _ in entry.device_bytes] == ["sm_80", "sm_100", "ptx_100"]
    log = (dist / "logs" / f"13.0-x86_64-torch{TORCH}.log").read_text(encoding="utf-8")
    # nvcc ran with the flags the project made from the variable (ninja -v prints them)
    assert "-gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_100,code=compute_100" in log


def test_without_it_the_projects_default_list_stops_the_cell(
    release_cache: Path, tmp_path: Path
) -> None:
    code, said, dist = build(tmp_path, release_cache, "env: {}")
    assert code == 4, said[-3000:]
    assert "stopped at its first compile" in said
    assert "sm_80, sm_90, PTX compute_90" in said  # the project's default, not the cell's
    assert "  or hand the cell's sms to K3_CUDA_ARCHS (setup.py:" in said  # the third way out
    assert "build.targets-env: {K3_CUDA_ARCHS: sms} in matrix.yaml" in said
    assert read_manifest(dist / "manifest.json").wheels == ()
