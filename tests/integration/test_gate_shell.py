"""`release gpu-gate` runs its command on dist/'s wheels: a command that hands {wheel} to a
shell gets a path the shell does not read as code, whatever --dist is named."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest

from release.cli import main
from release.matrix import load_matrix
from release.records.manifest import Manifest, WheelEntry, write_manifest
from tests.integration.wheels import make_wheel
from tests.unit.test_gate_plan import MATRIX


def gated(tmp_path: Path, dist_name: str) -> tuple[int, str]:
    """`gpu-gate` with `sh -c 'test -f {wheel} && echo {wheel} > seen'` on the x86_64
    cell's wheel in tmp_path/`dist_name`: its exit, and the wheel's filename."""
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.replace("pytest {wheel}", "test -f {wheel} && echo {wheel} > seen"))
    loaded = load_matrix(path)
    dist = tmp_path / dist_name
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
    code = main(["gpu-gate", "--matrix", str(path), "--runner", "gpu", "--dist", str(dist)])
    return code, wheel.name


def test_a_command_run_through_a_shell_gets_a_wheel_path_it_does_not_read_as_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sh -c '... {wheel}'` with `--dist 'd$(touch pwned)'` ran the touch."""
    monkeypatch.chdir(tmp_path)
    code, wheel = gated(tmp_path, "d$(touch pwned)")
    assert code == 0
    assert not list(tmp_path.rglob("pwned"))
    assert (tmp_path / "seen").read_text().strip().endswith(wheel)


def test_a_scratch_directory_a_shell_would_read_fails_the_run_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The link went under TMPDIR, whose own `$(...)` the shell then ran."""
    scratch = tmp_path / "t$(touch pwned)"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(tmp_path)
    code, _ = gated(tmp_path, "d x")
    assert code == 4
    assert not list(tmp_path.rglob("pwned"))
    assert not (tmp_path / "seen").exists()
    assert "set --dist and TMPDIR to plain paths" in capsys.readouterr().err
