"""A torch cell whose pinned torch requires what the project's build requirements exclude
(torch 2.11.0's `setuptools<82` beside a project's `setuptools>=82`; SageAttention's
`setuptools<75` beside torch 2.13.0's `setuptools>=77.0.3`) is stopped before its
environment is provisioned: the torch's own requirements are read from its PEP 658
METADATA on a stand-in index on 127.0.0.1 shaped like PyPI's, and no wheel is asked for
(pip had downloaded torch and its CUDA wheels, 1.3 GB, before it said so)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from release.backends.torch_extension import TorchEnvSpec
from release.building.torchcell import build_environment, requirements_problem
from release.errors import ToolchainError
from release.inspection.torchcuda import TorchIndexes
from release.toolchain.torchenv import REQUIREMENTS_HINT
from tests.integration.torchindex import StandInIndex, pypi_like, serving

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def pypi() -> Iterator[StandInIndex]:
    with serving(pypi_like()) as index:
        yield index


def spec_of(index: StandInIndex, *requirements: str) -> TorchEnvSpec:
    return TorchEnvSpec(
        torch=Version("2.11.0"), cuda="13.0", arch="x86_64", python=PYTHON,
        index_url=index.url, requirements=requirements, frontend="build",
    )  # fmt: skip


def test_a_torch_whose_requirements_exclude_the_builds_is_refused_before_any_download(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    pypi.requests.clear()
    with pytest.raises(ToolchainError) as caught:
        build_environment(
            spec_of(pypi, "wheel", "setuptools>=82"),
            toolkit=tmp_path / "cuda-home",
            cache_dir=tmp_path / "toolchains",
            python=sys.executable,
            env={},
            progress=None,
            torch_indexes=TorchIndexes(),
        )
    assert caught.value.message == (
        "torch 2.11.0 requires setuptools<82, which the build requirement setuptools>=82 (the "
        "project's [build-system] requires, or build.requires) excludes: pip cannot install both"
    )
    assert caught.value.hint == REQUIREMENTS_HINT
    asked = [path for path, _ in pypi.requests]
    assert asked[0] == "/simple/torch/"
    assert all(p == "/simple/torch/" or p.endswith(".metadata") for p in asked), asked
    assert not (tmp_path / "toolchains").exists(), "nothing was provisioned"


def test_requirements_that_admit_the_torch_or_cannot_be_read_stop_nothing(
    pypi: StandInIndex,
) -> None:
    indexes = TorchIndexes()
    assert requirements_problem(spec_of(pypi, "setuptools>=77,<82", "ninja"), indexes) is None
    # a requirement whose marker leaves it out of the cell's environment is none pip installs
    elsewhere = spec_of(pypi, 'setuptools>=82; python_version < "3.0"', "setuptools>=77")
    assert requirements_problem(elsewhere, indexes) is None
    assert (
        requirements_problem(spec_of(pypi, 'setuptools>=82; platform_machine == "x86_64"'), indexes)
        is not None
    )
    # the index has no such torch: pip's own install says what is wrong
    missing = TorchEnvSpec(
        torch=Version("2.13.0"), cuda="13.0", arch="x86_64", python=PYTHON,
        index_url=pypi.url, requirements=("setuptools>=82",), frontend="build",
    )  # fmt: skip
    assert requirements_problem(missing, indexes) is None
