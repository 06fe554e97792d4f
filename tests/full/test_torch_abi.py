"""The full tier's part of tests/integration/test_torch_abi.py (its docstring says what both
parts check).

The ABI check of torch extension wheels on shared objects made by the system's g++ and
gcc: a stand-in for torch's library (libfaketorch.so) and extensions that use it well, use
a symbol it lacks, or use its C++ symbols in a stable-ABI build; then (slow) on the
session's real wheels of the torch fixture against the libraries of the torch 2.14.1 they
were built beside (tests/full/shared_builds.py).
"""

from __future__ import annotations

import pytest

from release.inspection.torchabi import abi_problems
from release.toolchain.torchenv import TorchEnv
from tests.full.shared_builds import TorchBuild
from tests.integration.test_torch_abi import real_exports

pytestmark = pytest.mark.slow


def test_the_real_stable_wheel_passes_as_stable(
    torch_stable: TorchBuild, torch_environment: TorchEnv
) -> None:
    data = torch_stable.wheel.read_bytes()
    exports = real_exports(torch_environment)
    assert abi_problems(data, exports, stable=False, torch_label="2.14.1") == []
    assert abi_problems(data, exports, stable=True, torch_label="2.14.1") == []


def test_the_real_regular_wheel_passes_but_not_as_stable(
    torch_regular: TorchBuild, torch_environment: TorchEnv
) -> None:
    data = torch_regular.wheel.read_bytes()
    exports = real_exports(torch_environment)
    assert abi_problems(data, exports, stable=False, torch_label="2.14.1") == []
    found = abi_problems(data, exports, stable=True, torch_label="2.14.1")
    assert any("c10::" in p and "stable-ABI" in p for p in found), found
    assert found[-1].startswith("k3_torch_ops/_C.abi3.so: and ")


def test_the_real_wheels_need_the_cuda_runtime_torch_brings(
    torch_regular: TorchBuild, torch_environment: TorchEnv
) -> None:
    data = torch_regular.wheel.read_bytes()
    found = abi_problems(
        data, real_exports(torch_environment, with_cuda=False), stable=False, torch_label="2.14.1"
    )
    # nm -D lists 20 CUDA runtime symbols the wheel's object needs: 9 __cuda*, 11 cuda*
    assert found == [
        *(
            f"k3_torch_ops/_C.abi3.so: undefined symbol {name}: "
            "not exported by torch 2.14.1's libraries"
            for name in (
                "__cudaGetKernel",
                "__cudaLaunchKernel",
                "__cudaPopCallConfiguration",
                "__cudaPushCallConfiguration",
                "__cudaRegisterFatBinary",
            )
        ),
        "k3_torch_ops/_C.abi3.so: and 15 more undefined symbols not exported by torch "
        "2.14.1's libraries",
    ]
