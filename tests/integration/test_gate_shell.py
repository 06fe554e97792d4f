"""`release gpu-gate` runs its command on dist/'s wheels: a command that hands {wheel} to a
shell gets a path the shell does not read as code, whatever --dist is named."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from release.cli import main
from release.matrix import load_matrix
from release.records.manifest import Manifest, WheelEntry, write_manifest
from tests.integration.wheels import make_wheel
from tests.unit.test_gate_plan import MATRIX


def test_a_command_run_through_a_shell_gets_a_wheel_path_it_does_not_read_as_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sh -c '... {wheel}'` with `--dist 'd$(touch pwned)'` ran the touch."""
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.replace("pytest {wheel}", "test -f {wheel} && echo {wheel} > seen"))
    loaded = load_matrix(path)
    dist = tmp_path / "d$(touch pwned)"
    dist.mkdir()
    x86 = next(c for c in loaded.cells if c.arch == "x86_64")
    wheel = make_wheel(dist, platform=x86.platform_tag)
    assert wheel.name == x86.wheel_filename
    data = wheel.read_bytes()
    built = WheelEntry.of(
        x86, filename=wheel.name, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        sms=(), ptx=None, toolchain={},
    )  # fmt: skip
    manifest = Manifest(project="k3-kernels", version="0.1.0", wheels=(built,))
    write_manifest(manifest, dist / "manifest.json")
    monkeypatch.chdir(tmp_path)
    code = main(["gpu-gate", "--matrix", str(path), "--runner", "gpu", "--dist", str(dist)])
    assert code == 0
    assert not list(tmp_path.rglob("pwned"))
    assert (tmp_path / "seen").read_text().strip().endswith(x86.wheel_filename)
