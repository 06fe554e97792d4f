"""A setup.py that reads its version from the package's __init__.py (flash-attention's
`get_package_version()`, issue 42): the read commands name the project from its files,
install nothing and ask no build backend (tests/fixtures/version_file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from release.cli import main

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
