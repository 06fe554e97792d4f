"""Where each cell builds in GitHub Actions (`release matrix --format github`'s runs_on,
container and cuda_home), and the gpu-gate runners' labels given on the command line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from release.commands.matrix import gate_matrix, github_matrix, runner_labels
from release.errors import ConfigError, ToolchainError
from release.matrix import Matrix, matrix_from_text
from release.toolchain import pins
from release.toolchain.placement import placement

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def cmake_matrix(cuda: str, extra: str = "", manylinux: str = "2_34") -> Matrix:
    project = FIXTURES / "cmake_kernels"
    text = f"""\
project: {project}
build: {{backend: cmake}}
defaults: {{arches: [x86_64, aarch64], sms: [80, 90], ptx: 90, manylinux: "{manylinux}"}}
destinations: {{pypi: {{kind: pypi}}}}
cuda:
  "{cuda}": {{destination: pypi{extra}}}
"""
    return matrix_from_text(text, project / "matrix.yaml")


def shipped() -> Matrix:
    path = ROOT / "matrix.yaml"
    return matrix_from_text(path.read_text(encoding="utf-8"), path)


def test_x86_64_on_a_hosted_runner_aarch64_on_an_arm_runner_in_its_manylinux() -> None:
    where = {c.id: placement(c) for c in shipped().cells}
    assert {(p.runs_on, p.container, p.cuda_home) for i, p in where.items() if "x86_64" in i} == {
        ("ubuntu-24.04", "", "")
    }
    assert {(p.runs_on, p.container) for i, p in where.items() if "aarch64" in i} == {
        ("ubuntu-24.04-arm", "quay.io/pypa/manylinux_2_28_aarch64:2025.11.11-1")
    }


def test_csrc_cells_of_12_9_need_no_toolkit_image() -> None:
    """csrc's backend compiles 12.9 with NVRTC from PyPI."""
    cell = next(c for c in shipped().cells if str(c.cuda) == "12.9" and c.arch == "x86_64")
    assert placement(cell).container == ""


def test_an_nvcc_cell_of_13_0_builds_from_pypi_in_the_manylinux_container() -> None:
    cells = {c.arch: placement(c) for c in cmake_matrix("13.0").cells}
    assert cells["x86_64"].container == ""
    assert cells["aarch64"].container == "quay.io/pypa/manylinux_2_34_aarch64:2025.11.11-1"


def test_an_nvcc_cell_of_12_9_builds_in_the_toolkit_image_by_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digest = "sha256:" + "ab" * 32
    pinned = {k: replace(v, digest=digest) for k, v in pins.CUDA_TOOLKIT_IMAGES.items()}
    monkeypatch.setattr("release.toolchain.placement.CUDA_TOOLKIT_IMAGES", pinned)
    entries = {e["arch"]: e for e in github_matrix(cmake_matrix("12.9").cells)["include"]}
    # the PyPA's manylinux CUDA image of the cell's own level (cmake cells: manylinux_2_34)
    assert entries["x86_64"]["container"] == (
        f"quay.io/manylinux_cuda/manylinux_2_34_x86_64_cuda12_9@{digest}"
    )
    assert entries["aarch64"]["container"] == (
        f"quay.io/manylinux_cuda/manylinux_2_34_aarch64_cuda12_9@{digest}"
    )
    assert entries["aarch64"]["runs_on"] == "ubuntu-24.04-arm"
    assert {e["cuda_home"] for e in entries.values()} == {"/usr/local/cuda-12.9"}


def test_a_toolkit_image_without_a_digest_is_refused_with_the_remedy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unpinned = {k: replace(v, digest=None) for k, v in pins.CUDA_TOOLKIT_IMAGES.items()}
    monkeypatch.setattr("release.toolchain.placement.CUDA_TOOLKIT_IMAGES", unpinned)
    cell = next(c for c in cmake_matrix("12.9").cells if c.arch == "x86_64")
    with pytest.raises(ToolchainError) as caught:
        placement(cell)
    assert "12.9-x86_64: a cmake cell of CUDA 12.9 builds in a container image" in str(caught.value)
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(
        'set cuda["12.9"].toolkit-image.x86_64 in matrix.yaml to the image by digest '
        "(`docker buildx imagetools inspect "
        "quay.io/manylinux_cuda/manylinux_2_34_x86_64_cuda12_9:latest`"
    )
    assert "--cuda-home" in caught.value.hint


def test_a_level_without_a_pypa_cuda_image_is_refused_naming_the_key() -> None:
    """manylinux_cuda publishes 2_28 and 2_34 images only: a manylinux2014 cell of 12.9
    has no default image, and the refusal names the matrix key to set."""
    old = cmake_matrix("12.9", "", manylinux="2_17")
    cell = next(c for c in old.cells if c.arch == "x86_64")
    with pytest.raises(ToolchainError) as caught:
        placement(cell)
    assert caught.value.hint is not None
    assert caught.value.hint.startswith('set cuda["12.9"].toolkit-image.x86_64 in matrix.yaml')
    assert "NAME:TAG" in caught.value.hint


def test_the_matrix_pins_its_own_toolkit_image_over_the_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unpinned = {k: replace(v, digest=None) for k, v in pins.CUDA_TOOLKIT_IMAGES.items()}
    monkeypatch.setattr("release.toolchain.placement.CUDA_TOOLKIT_IMAGES", unpinned)
    mine = "ghcr.io/me/cuda-builder@sha256:" + "0f" * 32
    matrix = cmake_matrix("12.9", f", toolkit-image: {{x86_64: '{mine}'}}")
    where = {c.arch: c for c in matrix.cells}
    assert placement(where["x86_64"]).container == mine
    assert placement(where["x86_64"]).cuda_home == "/usr/local/cuda-12.9"
    with pytest.raises(ToolchainError):  # the matrix pins x86_64's only
        placement(where["aarch64"])


@pytest.mark.parametrize(
    "value",
    [
        "docker.io/pytorch/manylinux2_28-builder:cuda12.9",
        "img@sha256:abc",
        "UPPER@sha256:" + "0" * 64,
    ],
)
def test_a_toolkit_image_by_tag_is_refused_at_its_line(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        cmake_matrix("12.9", f", toolkit-image: {{x86_64: '{value}'}}")
    (problem,) = caught.value.problems
    assert 'cuda["12.9"].toolkit-image.x86_64: ' in problem
    assert "is not an image pinned by digest: write NAME@sha256:<64 hex>" in problem


def test_every_pinned_image_reference_is_a_digest() -> None:
    for image in pins.CUDA_TOOLKIT_IMAGES.values():
        assert image.digest is None or (
            image.digest.startswith("sha256:") and len(image.digest) == 7 + 64
        )


GATE = """\
gpu-gate:
  runners:
    - {labels: [self-hosted, linux, x64, h200], sms: [90]}
    - {labels: [self-hosted, linux, arm64, gh200], sms: [90], arch: aarch64}
  command: bash csrc/tests/gpu/run_on_device.sh {wheel} {expect_arch}
"""


def gated() -> Matrix:
    path = ROOT / "matrix.yaml"
    return matrix_from_text(path.read_text(encoding="utf-8") + GATE, path)


def test_runner_labels_replace_those_of_the_runners_they_name() -> None:
    matrix = gated()
    names = [r.name for r in matrix.gpu_gate.runners] if matrix.gpu_gate else []
    labels = runner_labels('{"self-hosted/linux/x64/h200": ["my-h200-pool"]}', names)
    include = gate_matrix(matrix, labels)["include"]
    assert [(e["runner"], e["labels"]) for e in include] == [
        ("self-hosted/linux/x64/h200", ["my-h200-pool"]),
        ("self-hosted/linux/arm64/gh200", ["self-hosted", "linux", "arm64", "gh200"]),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1]", "a JSON object of runner names to labels"),
        ("{", "not JSON"),
        ('{"h100": ["x"]}', "'h100' is not a gpu-gate runner"),
        ('{"self-hosted/linux/x64/h200": []}', "name the runner's labels"),
        ('{"self-hosted/linux/x64/h200": [3]}', "name the runner's labels"),
        # matrix.yaml's rule for a runner's labels, type too: these were emitted as given
        ('{"self-hosted/linux/x64/h200": "h200"}', "name the runner's labels"),
        ('{"self-hosted/linux/x64/h200": ["a\\u001b[2J"]}', "the label 'a\\x1b[2J' holds white"),
        ('{"self-hosted/linux/x64/h200": ["a b"]}', "the label 'a b' holds white space"),
        ('{"self-hosted/linux/x64/h200": ["x/y"]}', "or a /, which a runner's label does not"),
    ],
)
def test_bad_runner_labels_name_the_option(text: str, says: str) -> None:
    matrix = gated()
    names = [r.name for r in matrix.gpu_gate.runners] if matrix.gpu_gate else []
    with pytest.raises(ConfigError) as caught:
        runner_labels(text, names)
    assert caught.value.problems[0].startswith("--runner-labels: ")
    assert says in caught.value.problems[0]


def test_per_arch_gives_one_runner_all_torch_and_python_cells_of_its_arch() -> None:
    project = FIXTURES / "torch_ops"
    text = f"""\
project: {project}
build: {{backend: torch}}
defaults: {{arches: [x86_64, aarch64], sms: [80, 90], ptx: 90, manylinux: "2_28"}}
destinations: {{gh: {{kind: github, repository: k3-project/k3-torch-ops}}}}
cuda:
  "13.0":
    destination: gh
    local-label: cu130torch{{torch}}
    torch: ["2.10.0", "2.11.0"]
    python: ["3.11", "3.12"]
"""
    cells = matrix_from_text(text, project / "matrix.yaml").cells
    assert len(cells) == 8
    entries = github_matrix(cells, per="arch")["include"]
    assert [e["id"] for e in entries] == ["13.0-x86_64", "13.0-aarch64"]
    for entry in entries:
        assert entry["pythons"] == "3.11\n3.12"
        assert len(entry["wheels"].split()) == 4
    assert entries[0]["container"] == ""
    assert entries[1]["container"] == "quay.io/pypa/manylinux_2_28_aarch64:2025.11.11-1"
    # one entry per cell otherwise: a job per cell would build its whole arch four times
    assert len(github_matrix(cells)["include"]) == 8


def test_a_12_9_cell_without_device_code_needs_no_toolkit_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its CUDA_HOME of headers and libraries comes from PyPI, like the rest of its
    toolchain: the runner of its arch, no container on x86_64, whatever the images' pins."""
    unpinned = {k: replace(v, digest=None) for k, v in pins.CUDA_TOOLKIT_IMAGES.items()}
    monkeypatch.setattr("release.toolchain.placement.CUDA_TOOLKIT_IMAGES", unpinned)
    project = FIXTURES / "cmake_kernels"
    text = f"""\
project: {project}
build: {{backend: cmake}}
defaults: {{arches: [x86_64, aarch64], device-code: none, manylinux: "2_28"}}
destinations: {{pypi: {{kind: pypi}}}}
cuda:
  "12.9": {{destination: pypi}}
"""
    cells = {c.arch: c for c in matrix_from_text(text, project / "matrix.yaml").cells}
    assert placement(cells["x86_64"]).container == ""
    assert placement(cells["x86_64"]).cuda_home == ""
    aarch64 = placement(cells["aarch64"])
    assert aarch64.container == "quay.io/pypa/manylinux_2_28_aarch64:2025.11.11-1"
