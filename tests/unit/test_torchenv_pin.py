"""The requirement a torch cell's build environment installs its torch with: from PyPI the
exact version string (`===`), so that a `+cpu` local build from pip's other sources cannot
stand in for PyPI's CUDA build; from a named index, whose builds carry their label, `==`."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release.backends.torch_extension import TorchEnvSpec
from release.toolchain.torchenv import install_commands, torch_pin


def spec(torch: str, index_url: str | None) -> TorchEnvSpec:
    return TorchEnvSpec(
        torch=Version(torch), cuda="13.0", arch="x86_64", python="3.11", index_url=index_url,
        requirements=("apache-tvm-ffi==0.1.9",), frontend="build==1.2.2",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("torch", "index_url", "pin"),
    [
        ("2.13.0", None, "torch===2.13.0"),
        ("2.13.0", "https://pypi.org/simple/", "torch===2.13.0"),
        ("2.13", None, "torch===2.13.0"),  # PyPI spells every torch X.Y.Z
        ("2.9.1", "https://download.pytorch.org/whl/cu129", "torch==2.9.1"),
    ],
)
def test_the_pin_admits_only_the_build_the_cells_index_serves(
    torch: str, index_url: str | None, pin: str
) -> None:
    assert torch_pin(spec(torch, index_url)) == pin


def test_both_installs_hold_torch_to_that_pin() -> None:
    first, second = install_commands(spec("2.13.0", None), "python3", Path("v"))
    assert first[-1] == "torch===2.13.0"
    assert "--index-url" not in first
    assert "torch===2.13.0" in second
    assert "torch==2.13.0" not in second
