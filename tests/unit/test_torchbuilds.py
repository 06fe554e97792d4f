"""release.toolchain.torchbuilds' pure core: the CUDA a torch release is built for, read from
PyPI's own METADATA of torch 2.10.0 and 2.11.0 (tests/data/torch_index) or from a PyTorch
index's local label, and the torch a stable-ABI cell builds against by default: the oldest it
admits on its CUDA major."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from release.toolchain.torchbuilds import (
    BuiltFor,
    IndexTorches,
    NoTorchForCuda,
    TorchBuild,
    build_torch_problem,
    cuda_of_label,
    cuda_of_metadata,
    cuda_of_requirements,
    oldest_admitted,
    other_cuda_admitted,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_index"
INDEX = "https://pypi.example/simple/"


def test_pypis_torch_2_10_is_built_for_cuda_12_8_and_2_11_for_cuda_13() -> None:
    old = cuda_of_metadata((DATA / "torch-2.10.0.METADATA").read_bytes(), "x86_64", "3.11")
    new = cuda_of_metadata((DATA / "torch-2.11.0.METADATA").read_bytes(), "x86_64", "3.11")
    assert (old.major, old.version) == (12, "12.8")
    assert old.evidence == "nvidia-cuda-runtime-cu12==12.8.90"
    assert (new.major, new.version, new.evidence) == (13, "13.0", "cuda-toolkit==13.0.2")
    assert str(old) == "CUDA 12.8"


def test_requirements_that_do_not_apply_on_the_arch_say_nothing() -> None:
    """torch 2.10.0's CUDA wheels hold their nvidia-* requirements to x86_64: read for
    aarch64 they name no CUDA."""
    metadata = (DATA / "torch-2.10.0.METADATA").read_bytes()
    assert cuda_of_metadata(metadata, "aarch64").major is None


@pytest.mark.parametrize(
    ("requirements", "major", "version"),
    [
        (["nvidia-cuda-runtime==13.0.96; platform_system == 'Linux'"], 13, "13.0"),
        (["filelock", "nvidia-cudnn-cu13==9.19.0.56"], 13, "13"),
        (["filelock", "sympy>=1.13.3"], None, ""),
        (["nvidia-cuda-runtime-cu12==12.8.90; extra == 'cuda'"], None, ""),
    ],
    ids=["runtime-without-suffix", "only-another-nvidia-cu13", "cpu", "under-an-extra"],
)
def test_the_cuda_of_requirements(requirements: list[str], major: int | None, version: str) -> None:
    found = cuda_of_requirements([Requirement(r) for r in requirements], "x86_64")
    assert (found.major, found.version) == (major, version)


@pytest.mark.parametrize(
    ("label", "major", "version"),
    [("cu129", 12, "12.9"), ("cu130", 13, "13.0"), ("cu118", 11, "11.8"), ("cpu", None, "")],
)
def test_a_local_label_says_the_cuda(label: str, major: int | None, version: str) -> None:
    found = cuda_of_label(label)
    assert found is not None
    assert (found.major, found.version, found.evidence) == (major, version, f"its label +{label}")


def test_no_label_or_another_says_nothing() -> None:
    assert cuda_of_label(None) is None
    assert cuda_of_label("local1") is None


def build(version: str, major: int | None, cuda: str = "") -> TorchBuild:
    return TorchBuild(
        version=Version(version),
        built_for=BuiltFor(major=major, version=cuda or str(major or ""), evidence="test"),
        pythons=("3.10", "3.11"),
    )


PYPI = IndexTorches(
    index_url=INDEX,
    arch="x86_64",
    builds=(
        build("2.9.1", 12, "12.8"),
        build("2.10.0", 12, "12.8"),
        build("2.11.0", 13, "13.0"),
        build("2.14.1", 13, "13.0"),
    ),
)


def test_the_oldest_admitted_on_cuda_13_is_the_target_raised_to_the_first_cuda_13_torch() -> None:
    oldest = oldest_admitted(PYPI, Version("2.10"), 13, "3.11")
    assert oldest.version == Version("2.11.0")
    assert oldest.said() == (
        f"torch 2.11.0: the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on "
        f"{INDEX} (torch 2.10.0, built for CUDA 12.8)"
    )


def test_on_cuda_12_the_target_itself_is_the_oldest() -> None:
    oldest = oldest_admitted(PYPI, Version("2.10"), 12)
    assert oldest.version == Version("2.10.0")
    assert oldest.passed == ()


def test_an_index_without_a_torch_of_the_major_is_said_with_what_it_has() -> None:
    with pytest.raises(NoTorchForCuda) as raised:
        oldest_admitted(PYPI, Version("2.12"), 12)
    assert str(raised.value) == (
        f"{INDEX} has no torch >= 2.12 built for CUDA 12 for x86_64 "
        "(torch 2.14.1, built for CUDA 13.0)"
    )


def test_building_against_a_newer_torch_needs_the_matrix_to_say_so() -> None:
    oldest = oldest_admitted(PYPI, Version("2.10"), 13)
    assert build_torch_problem(oldest, Version("2.11.0"), newer_on_purpose=False) is None
    assert build_torch_problem(oldest, Version("2.14.1"), newer_on_purpose=True) is None
    problem = build_torch_problem(oldest, Version("2.14.1"), newer_on_purpose=False)
    assert problem is not None
    assert problem.startswith(
        "a stable-ABI build against torch 2.14.1, newer than the oldest torch it admits, "
        f"torch 2.11.0: the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on "
        f"{INDEX}"
    )
    assert problem.endswith(
        'Build against it (torch: "2.11.0"), or say the newer one is on purpose '
        "(torch-build: newer)"
    )


def test_an_older_torch_than_the_oldest_admitted_is_refused_even_on_purpose() -> None:
    oldest = oldest_admitted(PYPI, Version("2.10"), 13)
    problem = build_torch_problem(oldest, Version("2.10.0"), newer_on_purpose=True)
    assert problem is not None
    assert 'name torch 2.11.0 (torch: "2.11.0")' in problem


def test_the_releases_of_another_cuda_a_requirement_admits() -> None:
    assert other_cuda_admitted(Requirement("torch>=2.10"), PYPI, 13) == [PYPI.builds[1]]
    assert other_cuda_admitted(Requirement("torch>=2.11"), PYPI, 13) == []
