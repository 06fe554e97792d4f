"""release.building.gatetorch's decision: a wheel held to one torch series runs beside the
torch it was built against; a stable-ABI wheel beside the oldest and the newest torch of its
CUDA major that its requirement admits (a torch of another CUDA major is never one)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from release.building.gatetorch import Beside, besides
from release.inspection.torchcuda import BuiltFor, IndexTorches, TorchBuild
from release.matrix import load_matrix

DATA = Path(__file__).parent.parent / "data"
CELL = next(c for c in load_matrix(DATA / "matrix" / "build" / "torch-and-cmake.yaml").cells
            if c.torch is not None)  # fmt: skip
PYTHON = f"3.{sys.version_info.minor}"
INDEX = "https://pypi.example/simple/"


def build(version: str, major: int, cuda: str) -> TorchBuild:
    built_for = BuiltFor(major=major, version=cuda, evidence="test")
    return TorchBuild(version=Version(version), built_for=built_for, pythons=(PYTHON,))


TORCHES = IndexTorches(
    index_url=INDEX,
    arch="x86_64",
    builds=(build("2.10.0", 12, "12.8"), build("2.11.0", 13, "13.0"), build("2.12.0", 13, "13.0"),
            build("2.14.1", 13, "13.0")),
)  # fmt: skip


def test_a_wheel_of_one_series_runs_beside_the_torch_it_was_built_against() -> None:
    assert besides(CELL, Version("2.14.1"), Requirement("torch==2.14.*"), None) == (
        Beside(torch=Version("2.14.1"), why="built against it; the wheel requires torch==2.14.*"),
    )


def test_a_stable_abi_wheel_runs_beside_the_ends_of_what_it_admits_on_its_cuda_major() -> None:
    cell = replace(CELL, cuda=replace(CELL.cuda, major=13, minor=0))
    found = besides(cell, Version("2.11.0"), Requirement("torch>=2.10"), TORCHES)
    assert [(str(b.torch), b.why) for b in found] == [
        (
            "2.11.0",
            f"the oldest torch the wheel's torch>=2.10 admits on {INDEX}, built for CUDA 13.0",
        ),
        (
            "2.14.1",
            f"the newest torch the wheel's torch>=2.10 admits on {INDEX}, built for CUDA 13.0",
        ),
    ]


def test_a_requirement_with_no_torch_of_its_cuda_is_said() -> None:
    cell = replace(CELL, cuda=replace(CELL.cuda, major=12, minor=9))
    with pytest.raises(ValueError, match=r"torch>=2\.11 admits no torch built for CUDA 12 "):
        besides(cell, Version("2.11.0"), Requirement("torch>=2.11"), TORCHES)
