"""The full tier's part of tests/integration/test_torch_libs.py (its docstring says what both
parts check).

auditwheel's verdict with torch's libraries excluded, on real files: extensions made by
g++ that link stand-ins for torch's libraries and a library of no one's, and (slow) the
session's regular wheel of the torch fixture, built against torch 2.14.1
(tests/full/shared_builds.py).
"""

from __future__ import annotations

import pytest

from release.backends.torch_extension import TORCH_PROVIDED
from release.inspection.verdict import manylinux_verdict
from tests.full.shared_builds import TorchBuild

pytestmark = pytest.mark.slow


def test_the_real_regular_wheel_is_manylinux_only_with_torch_excluded(
    torch_regular: TorchBuild,
) -> None:
    verdict = manylinux_verdict(
        torch_regular.wheel, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED
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
