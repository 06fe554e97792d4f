"""The full tier's part of tests/integration/test_torch_libs.py (its docstring says what both
parts check).

auditwheel's verdict with the libraries of a wheel's runtime dependencies left out: the
session's regular wheel of the torch fixture, built against torch 2.14.1, with what the
torch environment's installed distributions provide (tests/full/shared_builds.py).
"""

from __future__ import annotations

import pytest

from release.inspection.runtimelibs import (
    installed_distributions,
    marker_environment,
    provided_by,
    wheel_requirements,
)
from release.inspection.verdict import manylinux_verdict
from release.toolchain.torchenv import TorchEnv
from tests.full.shared_builds import TorchBuild

pytestmark = pytest.mark.slow


def test_the_real_regular_wheel_is_manylinux_only_with_torch_excluded(
    torch_regular: TorchBuild, torch_environment: TorchEnv
) -> None:
    assert torch_environment.site_packages is not None
    requirements = wheel_requirements(torch_regular.wheel.read_bytes())
    assert requirements == ("torch==2.14.*",)
    provided = provided_by(
        requirements,
        installed_distributions(torch_environment.site_packages),
        marker_environment("3.11", "x86_64"),
    )
    assert provided["libc10.so"] == "torch"
    assert provided["libcudart.so.13"].startswith("nvidia-cuda-runtime")
    verdict = manylinux_verdict(
        torch_regular.wheel, manylinux="2_28", arch="x86_64", provided=provided.keys()
    )
    assert verdict.platform_tag.startswith("manylinux_"), verdict
    assert verdict.external_libraries == ()
    without = manylinux_verdict(torch_regular.wheel, manylinux="2_28", arch="x86_64")
    assert without.platform_tag == "linux_x86_64"
    # readelf -d: the regular wheel's _C.abi3.so needs these four of torch's
    assert without.external_libraries == (
        "libc10.so",
        "libc10_cuda.so",
        "libcudart.so.13",
        "libtorch_cpu.so",
    )
