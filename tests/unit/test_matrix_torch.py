"""The torch axes of matrix.yaml: `torch:` (one exact version or a list), `python:` and
`abi3:`, `torch-index:`, and `{torch}` in a local label; each torch x Python point is a
cell whose filename carries the tags the build makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.errors import ConfigError
from release.matrix import Matrix, cell_dict, matrix_from_text

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_ops"

HEAD = f"""\
project: {FIXTURE}
build: {{backend: torch}}
defaults:
  arches: [x86_64]
  sms: [80, 90]
  ptx: 90
  manylinux: "2_28"
destinations:
  pypi: {{kind: pypi}}
  gh: {{kind: github, repository: k3-project/k3-torch-ops}}
cuda:
"""


def load(cuda: str) -> Matrix:
    return matrix_from_text(HEAD + cuda, FIXTURE / "matrix.yaml")


def problems(cuda: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(cuda)
    return "\n".join(caught.value.problems)


def test_one_torch_and_an_abi3_floor_make_one_abi3_cell() -> None:
    matrix = load('  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10"}\n')
    (cell,) = matrix.cells
    assert cell.id == "13.0-x86_64-torch2.14.1"
    assert cell.wheel_filename == "k3_torch_ops-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert cell_dict(cell)["torch"] == "2.14.1"
    assert cell_dict(cell)["abi3"] == "3.10"


def test_torch_versions_times_pythons_with_the_torch_label() -> None:
    matrix = load(
        '  "12.9":\n'
        "    destination: gh\n"
        "    local-label: cu129torch{torch}\n"
        '    torch: ["2.10.0", "2.11.0"]\n'
        '    python: ["3.11", "3.12"]\n'
        "    torch-index: https://download.pytorch.org/whl/cu129\n"
    )
    names = [c.wheel_filename for c in matrix.cells]
    assert names == [
        "k3_torch_ops-0.1.0+cu129torch2.10-cp311-cp311-manylinux_2_28_x86_64.whl",
        "k3_torch_ops-0.1.0+cu129torch2.10-cp312-cp312-manylinux_2_28_x86_64.whl",
        "k3_torch_ops-0.1.0+cu129torch2.11-cp311-cp311-manylinux_2_28_x86_64.whl",
        "k3_torch_ops-0.1.0+cu129torch2.11-cp312-cp312-manylinux_2_28_x86_64.whl",
    ]
    assert [c.id for c in matrix.cells][1] == "12.9-x86_64-torch2.10.0-cp312"
    assert {c.torch_index for c in matrix.cells} == {"https://download.pytorch.org/whl/cu129"}


def test_several_torch_versions_without_the_torch_label_are_refused() -> None:
    found = problems(
        '  "12.9": {destination: gh, local-label: cu129, '
        'torch: ["2.10.0", "2.11.0"], abi3: "3.10"}\n'
    )
    assert 'cuda["12.9"].local-label' in found
    assert "put {torch} in its local-label" in found
    assert "0.1.0+cu129torch2.10" in found


def test_pypi_takes_one_torch_per_release() -> None:
    found = problems('  "13.0": {destination: pypi, torch: ["2.13.0", "2.14.1"], abi3: "3.10"}\n')
    assert 'cuda["13.0"].torch' in found
    assert "one torch per release" in found


def test_two_torch_releases_of_one_minor_would_share_a_filename() -> None:
    found = problems(
        '  "12.9": {destination: gh, local-label: "cu129torch{torch}", '
        'torch: ["2.11.0", "2.11.1"], abi3: "3.10"}\n'
    )
    assert "both produce k3_torch_ops-0.1.0+cu129torch2.11-cp310-abi3" in found


def test_a_torch_cell_names_its_torch_and_its_python() -> None:
    found = problems('  "13.0": {destination: pypi}\n')
    assert "names no torch" in found
    assert "need `python:`" in found


def test_an_unquoted_python_version_is_explained() -> None:
    found = problems('  "13.0": {destination: pypi, torch: "2.14.1", python: [3.10]}\n')
    assert "3.10 unquoted as the number 3.1" in found


def test_an_abi3_wheel_is_built_with_one_python() -> None:
    found = problems(
        '  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10", python: ["3.11", "3.12"]}\n'
    )
    assert "an abi3 wheel serves every CPython" in found


def test_torch_settings_belong_to_the_torch_backend() -> None:
    text = HEAD + '  "13.0": {destination: pypi, torch: "2.14.1", build: {backend: cmake}}\n'
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(text, FIXTURE / "matrix.yaml")
    assert (
        "'torch' is for the torch backend; CUDA 13.0 builds with cmake" in caught.value.problems[0]
    )


GATE = """\
gpu-gate:
  runners: [{labels: [self-hosted, h200], sms: [90]}]
  command: python -m pytest tests
"""


def test_a_torch_matrix_gate_may_leave_the_wheel_out_as_it_is_installed_for_it() -> None:
    cuda = '  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10"}\n'
    matrix = matrix_from_text(HEAD + cuda + GATE, FIXTURE / "matrix.yaml")
    assert matrix.gpu_gate is not None
    mixed = (
        HEAD.replace("build: {backend: torch}\n", "")
        + cuda.replace(
            'torch: "2.14.1", abi3: "3.10"',
            'build: {backend: torch}, torch: "2.14.1", abi3: "3.10"',
        )
        + '  "12.9": {destination: gh, local-label: cu129}\n'
    )
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(mixed + GATE, FIXTURE / "matrix.yaml")
    assert any("must name the wheel as {wheel}" in p for p in caught.value.problems)
