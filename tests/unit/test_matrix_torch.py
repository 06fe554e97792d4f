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


# A JIT-first torch project's matrix: no GPU targets at all (HEAD's defaults name some).
HOST_ONLY = f"""\
project: {FIXTURE}
build: {{backend: torch}}
defaults:
  arches: [x86_64, aarch64]
  manylinux: "2_28"
  device-code: none
destinations:
  pypi: {{kind: pypi}}
  gh: {{kind: github, repository: k3-project/k3-torch-ops}}
cuda:
"""


def test_python_any_makes_one_py3_none_wheel_per_cuda_version_and_arch() -> None:
    matrix = matrix_from_text(
        HOST_ONLY
        + '  "13.0": {destination: pypi, torch: "2.14.1", python: any}\n'
        + '  "12.9": {destination: gh, local-label: cu129, torch: "2.11.0", python: any}\n',
        FIXTURE / "matrix.yaml",
    )
    assert [(c.id, c.wheel_filename) for c in matrix.cells] == [
        ("13.0-x86_64-torch2.14.1", "k3_torch_ops-0.1.0-py3-none-manylinux_2_28_x86_64.whl"),
        ("13.0-aarch64-torch2.14.1", "k3_torch_ops-0.1.0-py3-none-manylinux_2_28_aarch64.whl"),
        (
            "12.9-x86_64-torch2.11.0",
            "k3_torch_ops-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl",
        ),
        (
            "12.9-aarch64-torch2.11.0",
            "k3_torch_ops-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl",
        ),
    ]
    cell = matrix.cells[0]
    assert (cell.python, cell.abi3, cell.sms, cell.ptx) == (None, None, (), None)
    assert cell.host_only
    shown = cell_dict(cell)
    assert shown["device_code"] == "none"
    assert "python" not in shown
    assert "abi3" not in shown


def test_python_any_with_an_abi3_floor_is_refused() -> None:
    found = problems('  "13.0": {destination: pypi, torch: "2.14.1", python: any, abi3: "3.10"}\n')
    assert 'cuda["13.0"].python: python: any builds one py3-none wheel, abi3 one' in found


def test_the_missing_python_names_python_any() -> None:
    assert "or `any`: one py3-none wheel" in problems(
        '  "13.0": {destination: pypi, torch: "2.14.1"}\n'
    )


def test_a_cuda_version_without_device_code_takes_no_gpu_targets_from_the_defaults() -> None:
    found = problems(
        '  "13.0": {destination: pypi, torch: "2.14.1", python: any, device-code: none}\n'
    )
    # HEAD's defaults give sms and ptx, which a CUDA version without device code cannot take
    assert "defaults.sms: for CUDA 13.0: sms is for device code, and device-code: none" in found
    assert "defaults.ptx: for CUDA 13.0: ptx is for device code" in found


def test_a_host_only_cell_is_gated_as_built_only() -> None:
    matrix = matrix_from_text(
        HOST_ONLY + '  "13.0": {destination: pypi, torch: "2.14.1", python: any}\n' + GATE,
        FIXTURE / "matrix.yaml",
    )
    assert matrix.gpu_gate is not None
    runner = matrix.gpu_gate.runners[0]
    runs = matrix.gpu_gate.runs(runner, matrix.cells)
    assert [(r.cell.id, r.build, r.expect_arch) for r in runs] == [
        ("13.0-x86_64-torch2.14.1", "cubin", "")
    ]


@pytest.mark.parametrize(
    "index",
    ["https://u:pass@h.example/whl", "https://u:pa\\\\ss@h.example/whl", "https://h/?token=t"],
)
def test_a_torch_index_holding_credentials_is_refused(index: str) -> None:
    said = problems(
        '  "12.9":\n'
        "    destination: gh\n"
        "    local-label: cu129\n"
        '    torch: "2.11.0"\n'
        '    python: "3.12"\n'
        f'    torch-index: "{index}"\n'
    )
    assert "torch-index: " in said
    assert "holds credentials" in said
    assert "pass" not in said.replace("password", "")
