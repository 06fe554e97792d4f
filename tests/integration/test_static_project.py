"""Reads never provision: a setup.py project whose name and version are literals (or
module-level constants) is read with ast, so `release matrix` and `release build --dry-run`
name its wheels without installing anything: no torch venv, no toolchain, no metadata
entry appears in the cache, and nothing is written into the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "extension_template"
RELEASE = Path(sys.executable).with_name("release")

MATRIX = """\
project: proj
build: {backend: torch, env: {FORCE_CUDA: "1"}}
defaults: {arches: [x86_64], sms: [80, 90], ptx: 90, manylinux: "2_34", abi3: "3.9"}
cuda:
  "13.0": {destination: pypi, torch: "2.14.1"}
destinations:
  pypi: {kind: pypi}
"""


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def release(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELEASE_")}
    env["RELEASE_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        [str(RELEASE), *args, "--matrix", str(tmp_path / "matrix.yaml"), "--json"],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip


def test_a_setup_py_project_with_literals_is_named_without_its_backend(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    before = tree(project)
    (tmp_path / "matrix.yaml").write_text(MATRIX, encoding="utf-8")

    listed = release(tmp_path, "matrix")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert (document["project"], document["version"]) == ("muladd_ops", "0.0.1")
    assert [c["wheel"] for c in document["cells"]] == [
        "muladd_ops-0.0.1-cp39-abi3-manylinux_2_34_x86_64.whl"
    ]
    assert "asking the build backend" not in listed.stderr

    dry = release(tmp_path, "build", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["cells"][0]["wheel"] == document["cells"][0]["wheel"]

    assert not (tmp_path / "cache").exists()  # no torch venv, no toolchain, no metadata/
    assert tree(project) == before
