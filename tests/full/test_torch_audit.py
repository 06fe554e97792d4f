"""The full tier's part of tests/integration/test_torch_audit.py (its docstring says what both
parts check).

torch-abi-audit run on stable-ABI wheels (release.inspection.torchaudit) over shared
objects made by the system's g++: one that calls only the C shim of its target, one that
calls a shim newer than its target, one that takes a c10 C++ symbol; a Python without
torch-abi-audit answers None (torchabi's own check then stands in); then (slow) the torch
fixture's real stable and regular wheels (tests/full/shared_builds.py).
"""

from __future__ import annotations

import pytest

from tests.full.shared_builds import TorchBuild
from tests.integration.test_torch_audit import audit

pytestmark = pytest.mark.slow


def test_the_real_stable_wheel_passes_and_the_regular_one_does_not(
    torch_stable: TorchBuild, torch_regular: TorchBuild
) -> None:
    assert audit(torch_stable.wheel.read_bytes()) == []
    found = audit(torch_regular.wheel.read_bytes()) or []
    assert found[0].startswith("k3_torch_ops/_C.abi3.so: ")
    assert "is torch's unstable C++ API" in found[0]
    assert found[-1].startswith("k3_torch_ops/_C.abi3.so: and ")
