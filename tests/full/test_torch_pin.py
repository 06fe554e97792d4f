"""The torch pin on the session's real wheels of the torch fixture, built against torch
2.14.1 (tests/full/shared_builds.py): what their build logs and METADATA already
say, and a rewritten wheel that check-wheel-contents and packaging's metadata reader
accept. Slow: the wheels are real torch builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from release.building.torchpin import pinned, stable_target_version, torch_requirement
from release.wheelfile import wheel_facts
from tests.full.shared_builds import TorchBuild

pytestmark = pytest.mark.slow

BUILT = Version("2.14.1+cu130")


@pytest.mark.parametrize("flavour", ["torch_stable", "torch_regular"], ids=["stable", "regular"])
def test_the_built_wheels_already_say_what_their_build_implies(
    flavour: str, request: pytest.FixtureRequest
) -> None:
    built: TorchBuild = request.getfixturevalue(flavour)
    target = stable_target_version(built.log.read_text(errors="replace"))
    assert target == (Version("2.10") if built.abi == "stable" else None)
    # a stable-ABI wheel's floor: PyPI's first torch on CUDA 13, not its target's 2.10.0
    requirement = torch_requirement(BUILT, Version("2.11") if target is not None else None)
    data = built.wheel.read_bytes()
    assert pinned(built.wheel.name, data, requirement, built_with=BUILT) == data


def test_a_narrowed_wheel_passes_check_wheel_contents(
    torch_stable: TorchBuild, tmp_path: Path
) -> None:
    wheel = torch_stable.wheel
    data = pinned(wheel.name, wheel.read_bytes(), torch_requirement(BUILT, None))
    facts = wheel_facts(data)
    assert facts.metadata_problems == ()
    assert facts.metadata is not None
    assert b"Requires-Dist: torch==2.14.*\n" in facts.metadata
    assert b"torch>=2.10" not in facts.metadata
    out = tmp_path / wheel.name
    out.write_bytes(data)
    checker = Path(sys.executable).parent / "check-wheel-contents"  # a test dependency
    result = subprocess.run([str(checker), str(out)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
