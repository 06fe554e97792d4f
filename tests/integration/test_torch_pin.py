"""The torch pin on the real wheels built against torch 2.14.1 in /tmp/torchlab (skipped
where that lab is missing): what their build logs and METADATA already say, and a
rewritten wheel that check-wheel-contents and packaging's metadata reader accept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from release.build.torchpin import pinned, stable_target_version, torch_requirement
from release.wheelfile import wheel_facts

OUT = Path("/tmp/torchlab/out")  # noqa: S108  # a fixed place outside the repo, not a temp file
BUILT = Version("2.14.1+cu130")


def lab_wheel(kind: str) -> Path:
    found = sorted((OUT / kind).glob("*.whl"))
    if not found or not (OUT / f"{kind}.log").is_file():
        pytest.skip(f"no wheel and build log of torch 2.14.1 in {OUT} (outside the repo)")
    return found[0]


@pytest.mark.parametrize("kind", ["stable", "final-regular"])
def test_the_lab_wheels_already_say_what_their_build_implies(kind: str) -> None:
    wheel = lab_wheel(kind)
    target = stable_target_version((OUT / f"{kind}.log").read_text(errors="replace"))
    assert target == (Version("2.10") if kind == "stable" else None)
    requirement = torch_requirement(BUILT, target)
    data = wheel.read_bytes()
    assert pinned(wheel.name, data, requirement, built_with=BUILT) == data


def test_a_narrowed_wheel_passes_check_wheel_contents(tmp_path: Path) -> None:
    wheel = lab_wheel("stable")
    data = pinned(wheel.name, wheel.read_bytes(), torch_requirement(BUILT, None))
    facts = wheel_facts(data)
    assert facts.metadata_problems == ()
    assert facts.metadata is not None
    assert b"Requires-Dist: torch==2.14.*\n" in facts.metadata
    assert b"torch>=2.10" not in facts.metadata
    out = tmp_path / wheel.name
    out.write_bytes(data)
    checker = Path(sys.executable).parent / "check-wheel-contents"
    if not checker.exists():
        pytest.skip("check-wheel-contents is not installed")
    result = subprocess.run([str(checker), str(out)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
