"""release.building.torchcell's tag check: the build's interpreter and ABI tags against the
cell's, and a name that is not a wheel's said as such."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from release.building.torchcell import tags_problem
from release.matrix import load_matrix

DATA = Path(__file__).parent.parent / "data"
CELL = next(
    c
    for c in load_matrix(DATA / "matrix" / "good" / "shipped-shape.yaml").cells
    if c.id == "13.0-x86_64"
)


def test_the_cells_own_wheel_has_no_tag_problem() -> None:
    assert tags_problem(CELL.wheel_filename, CELL) is None


def test_another_interpreter_and_abi_is_named_with_the_remedy() -> None:
    name = CELL.wheel_filename.replace("-py3-none-", "-cp311-cp311-")
    assert tags_problem(name, CELL) == (
        "the build made a cp311-cp311 wheel, the cell is py3-none (not an abi3 build: list "
        "the Pythons to build it for under python:)"
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("hostname", "hostname: not a .whl file"),
        (
            "k3_kernels-0.1.x-py3-none-manylinux_2_28_x86_64.whl",
            "k3_kernels-0.1.x-py3-none-manylinux_2_28_x86_64.whl: not a valid wheel filename "
            "(invalid version)",
        ),
    ],
)
def test_a_name_that_is_not_a_wheels_is_a_problem_not_a_traceback(name: str, problem: str) -> None:
    assert tags_problem(name, CELL) == problem


JIT = load_matrix(DATA / "matrix" / "build" / "torch-jit.yaml").cells[0]


def test_a_python_any_torch_cell_expects_py3_none_and_says_how_to_get_it() -> None:
    assert JIT.wheel_filename == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert tags_problem(JIT.wheel_filename, JIT) is None
    assert (
        tags_problem(JIT.wheel_filename.replace("py3-none-manylinux", "py3-none-linux"), JIT)
        is None
    )
    cp311 = JIT.wheel_filename.replace("-py3-none-", "-cp311-cp311-")
    assert tags_problem(cp311, JIT) == (
        "the build made a cp311-cp311 wheel, the cell is py3-none (python: any expects one "
        "py3-none wheel of an extension that uses no Python C-API: make the project tag its "
        "wheel py3-none (its bdist_wheel's get_tag), or list the Pythons to build it for "
        "under python:)"
    )


def test_a_py3_none_build_for_a_cell_of_one_python_points_to_python_any() -> None:
    per_python = replace(JIT, python="3.11")
    assert tags_problem(JIT.wheel_filename, per_python) == (
        "the build made a py3-none wheel, the cell is cp311-cp311 (a build that uses no "
        "Python C-API: set python: any for it)"
    )
