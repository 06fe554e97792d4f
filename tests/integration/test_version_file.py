"""A setup.py that reads its version from the package's __init__.py (flash-attention's
`get_package_version()`, issue 42): the read commands name the project from its files,
install nothing and ask no build backend (tests/fixtures/version_file)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from release.cli import main

GIT = shutil.which("git") or "git"


def git(where: Path, *args: str) -> None:
    subprocess.run(
        [GIT, "-C", str(where), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True, capture_output=True,
    )  # fmt: skip


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "version_file"
MATRIX = """\
project: proj
build: {backend: torch}
defaults: {arches: [x86_64], sms: [90], manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi, torch: "2.14.1", python: ["3.11"]}
destinations:
  pypi: {kind: pypi}
"""


def test_the_read_commands_take_the_version_from_the_file_and_install_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(FIXTURE, tmp_path / "proj")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX, encoding="utf-8")
    cache = tmp_path / "cache"
    monkeypatch.setenv("RELEASE_CACHE_DIR", str(cache))
    assert main(["matrix", "--matrix", str(matrix), "--json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert (document["project"], document["version"]) == ("kernels_ssm", "2.8.3")
    assert (
        document["cells"][0]["wheel"] == "kernels_ssm-2.8.3-cp311-cp311-manylinux_2_34_x86_64.whl"
    )
    assert "asking the build backend" not in err
    dist = tmp_path / "dist"
    args = ["build", "--matrix", str(matrix), "--dry-run", "--cache-dir", str(cache)]
    assert main([*args, "--out", str(dist)]) == 0
    out, err = capsys.readouterr()
    assert "kernels_ssm-2.8.3" in out + err
    assert "asking the build backend" not in out + err
    assert not cache.exists(), "a read of a version file provisions nothing"
    assert not dist.exists()


SCM_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "setuptools-scm>=8", "torch>=2.10"]
build-backend = "setuptools.build_meta"

[project]
name = "stable-ops"
dynamic = ["version"]

[tool.setuptools_scm]
"""


def test_a_setuptools_scm_version_is_the_checkouts_tag_read_without_the_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: setuptools-scm's own library reads the version from the tags; nothing is
    provisioned and no backend asked (before: nvcc and a torch environment, to ask it)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(SCM_PYPROJECT, encoding="utf-8")
    (project / "setup.py").write_text("from setuptools import setup\nsetup()\n", encoding="utf-8")
    git(project, "init", "-q", ".")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "first")
    git(project, "tag", "v0.4.1")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX, encoding="utf-8")
    cache = tmp_path / "cache"
    monkeypatch.setenv("RELEASE_CACHE_DIR", str(cache))
    assert main(["matrix", "--matrix", str(matrix), "--json"]) == 0
    out, err = capsys.readouterr()
    assert (json.loads(out)["project"], json.loads(out)["version"]) == ("stable-ops", "0.4.1")
    assert "asking the build backend" not in err
    git(project, "commit", "-q", "--allow-empty", "-m", "after the tag")
    assert main(["matrix", "--matrix", str(matrix), "--json"]) == 0
    version = json.loads(capsys.readouterr()[0])["version"]
    assert version.startswith("0.4.2.dev1+g"), version  # setuptools-scm's next version
    assert not cache.exists()
