"""The full tier's part of tests/integration/test_sdist_build.py (its docstring says what both
parts check).

The sdist of csrc through its own PEP 517 backend (`python -m build --sdist`, run by
release.proc): two checkouts of the same commit, their files of other times, give the same
bytes; `release build --sdist` refuses a nightly and says which build makes the sdist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from tests.full.shared_builds import linked_cache
from tests.integration.test_sdist_build import EPOCH, ONE_CELL, checkout

pytestmark = pytest.mark.slow


def test_a_wheel_rebuilt_out_of_the_sdist_is_the_built_one(
    tmp_path: Path, release_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """csrc for one SM: `release build --sdist`, then the reproduce job's `--compare`,
    which rebuilds the cell out of the unpacked sdist from empty caches: the same bytes."""
    where = checkout(tmp_path / "repo", EPOCH)
    (where / "matrix.yaml").write_text(ONE_CELL, encoding="utf-8")
    matrix = str(where / "matrix.yaml")
    cache = ["--cache-dir", str(linked_cache(tmp_path / "cache", release_cache))]
    dist = where / "dist"
    assert main(["build", "--matrix", matrix, "--sdist", "--out", str(dist), *cache]) == 0
    manifest = json.loads((dist / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sdist"]["filename"] == "k3_kernels-0.1.0.tar.gz"
    capsys.readouterr()
    args = ["build", "--matrix", matrix, "--compare", str(dist / "manifest.json"), "--json"]
    assert main([*args, "--out", str(tmp_path / "rebuild"), *cache]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["from_sdist"] == "k3_kernels-0.1.0.tar.gz"
    assert document["identical"] is True
    assert [w["detail"] for w in document["wheels"]] == ["same sha256"]
    assert "/release-sdist-" in captured.err  # the PEP 517 build ran in the unpacked sdist
