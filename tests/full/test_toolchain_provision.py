"""Provision the CUDA 12.9 and 13.0 toolchains from PyPI into a fresh cache (slow)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from release import proc
from release.toolchain import Toolchain, provision, resolve

pytestmark = pytest.mark.slow


@dataclass
class CountingRunner(proc.Runner):
    """The real runner, counting pip installs."""

    pip_installs: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(
        self, cmd: Sequence[str], *, env: Mapping[str, str], **options: Any
    ) -> proc.Completed:
        if list(cmd[1:4]) == ["-m", "pip", "install"]:
            self.pip_installs.append(tuple(c for c in cmd if "==" in c))
        return super().__call__(cmd, env=env, **options)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("toolchains")


@pytest.fixture(scope="module")
def provisioned(cache: Path) -> dict[str, Toolchain]:
    runner = CountingRunner()
    out = {
        "13.0": provision(
            resolve("13.0", "x86_64", cuda_home=None, cache_dir=cache), runner, env=dict(os.environ)
        ),
        "12.9": provision(
            resolve("12.9", "aarch64", cuda_home=None, cache_dir=cache),
            runner,
            env=dict(os.environ),
        ),
    }
    # zig and cuobjdump are shared: four pinned sets in all, each installed once.
    assert len(runner.pip_installs) == 4
    return out


def test_cuda_13_nvcc_from_pypi_reports_13_0(provisioned: dict[str, Toolchain]) -> None:
    tc = provisioned["13.0"]
    assert tc.device_version == "13.0.88"
    assert tc.cuda_home is not None
    assert (tc.cuda_home / "bin" / "nvcc").is_file()
    assert (tc.cuda_home / "include" / "cuda_bf16.h").is_file()
    assert tc.build_env()["RELEASE_CUDA_HOME"] == str(tc.cuda_home)


def test_cuda_12_9_nvrtc_and_nvfatbin_from_pypi(provisioned: dict[str, Toolchain]) -> None:
    tc = provisioned["12.9"]
    assert tc.device_version == "12.9.86"
    assert tc.nvrtc_lib is not None
    assert tc.nvrtc_lib.name.startswith("libnvrtc.so.12")
    assert tc.nvfatbin_lib is not None
    assert tc.nvfatbin_lib.name.startswith("libnvfatbin.so.12")
    assert [d.name for d in tc.include_dirs] == ["include"]
    assert (tc.include_dirs[0] / "cuda_fp16.h").is_file()


def test_zig_and_cuobjdump_report_their_pinned_versions(provisioned: dict[str, Toolchain]) -> None:
    for tc in provisioned.values():
        assert tc.cc_version == "0.17.1"
        assert tc.cc[-1] == f"{tc.plan.target_arch}-linux-gnu.2.28"
        assert tc.inspector_version == "13.2.86"


def test_second_provision_installs_nothing(cache: Path, provisioned: dict[str, Toolchain]) -> None:
    runner = CountingRunner()
    again = provision(
        resolve("12.9", "x86_64", cuda_home=None, cache_dir=cache), runner, env=dict(os.environ)
    )
    assert runner.pip_installs == []
    assert again.installed == ()
    assert again.nvrtc_lib == provisioned["12.9"].nvrtc_lib
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith("zig-global")) == sorted(
        {p.plan.install_dir(s).name for p in provisioned.values() for s in p.plan.pinsets}
    )
