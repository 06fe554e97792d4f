"""A JIT-first torch extension through `release build`: tests/fixtures/torch_jit (a host-only
_C.so against torch's libc10, no Python C-API, no device code) in a torch cell of
`device-code: none` and `python: any`, beside torch 2.14.1 in the session's torch
environment (the torch fixture's: the same build requirements, the same Python).

Its wheel is one py3-none wheel, pinned to the torch it was built with, and the ABI check
that passed in the build finds each of its undefined torch symbols in that torch's libraries.
Slow: a real build against a real torch."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from release.inspection.devicecode import host_only_problems
from release.inspection.pythonapi import python_api_problems
from release.inspection.runtimelibs import wheel_requirements
from release.inspection.torchabi import abi_problems, shared_objects, torch_exports
from release.toolchain.torchenv import TorchEnv
from tests.full.shared_builds import TORCH_CLI, TORCH_EPOCH, torch_cache, torch_environment

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_jit"
WHEEL = "k3_torch_jit-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
__all__ = ["torch_cache", "torch_environment"]  # the session's, used by name below


def test_a_jit_first_torch_extension_is_one_py3_none_wheel_pinned_and_abi_checked(
    torch_environment: TorchEnv, torch_cache: Path, tmp_path: Path
) -> None:
    matrix = tmp_path / "matrix.yaml"
    text = (FIXTURE / "matrix.yaml").read_text().replace("project: .", f"project: {FIXTURE}")
    matrix.write_text(text)
    dist = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-c", TORCH_CLI,
         "build", "--matrix", str(matrix), "--out", str(dist), "--cache-dir", str(torch_cache)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": TORCH_EPOCH},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = (dist / WHEEL).read_bytes()
    with zipfile.ZipFile(dist / WHEEL) as archive:
        assert "k3_torch_jit/_C.so" in archive.namelist()
        wheel = archive.read("k3_torch_jit-0.1.0.dist-info/WHEEL").decode()
    assert "Tag: py3-none-manylinux_2_34_x86_64\n" in wheel
    assert wheel_requirements(data) == ("torch==2.14.*",)
    assert host_only_problems(data) == []
    assert python_api_problems(data) == []
    (library,) = shared_objects(data)
    assert "libc10.so" in library.needed
    exports = torch_exports(torch_environment.lib_dirs)
    from_torch = [s.name for s in library.undefined if "torchCheckFail" in s.name]
    assert from_torch, "the library calls into libc10"
    assert set(from_torch) <= exports
    label = torch_environment.torch_version
    assert abi_problems(data, exports, stable=False, torch_label=label) == []
    # beside a torch without that symbol, the same check refuses it, naming it
    (problem,) = abi_problems(data, exports - {from_torch[0]}, stable=False, torch_label=label)
    assert problem.startswith("k3_torch_jit/_C.so: undefined symbol c10::detail::torchCheckFail")
    assert problem.endswith(f"not exported by torch {label}'s libraries")
