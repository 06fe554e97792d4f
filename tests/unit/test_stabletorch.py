"""release.inspection.stabletorch: the torch a stable-ABI cell builds against by default, the
oldest its wheel admits on its CUDA major (the target raised to the index's first torch of
that major), and the build against another torch refused unless matrix.yaml says a newer
one is on purpose."""

from __future__ import annotations

import pytest
from packaging.version import Version

from release.inspection.stabletorch import NoTorchForCuda, build_torch_problem, oldest_admitted
from release.inspection.torchcuda import BuiltFor, IndexTorches, TorchBuild

INDEX = "https://pypi.example/simple/"


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
