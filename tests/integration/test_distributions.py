"""The tool's own distributions: a wheel and an sdist of cuda-wheel-release that hold the
tool only, at the version of release/__init__.py, byte-identical when rebuilt, and clean by
twine check and check-wheel-contents (what the tool's release workflow runs).

`python -m build --no-isolation` with the test environment's hatchling: a few seconds, no
index.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from release import __version__

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NAME = "cuda_wheel_release"
# what neither distribution may hold: the example kernel project, the tests, the
# benchmarks, the workflows and the docs beyond the README
SOURCE_DATE_EPOCH = "1767225600"  # 2026-01-01, as the release workflow sets it from git
NOT_THE_TOOL = ("csrc/", "tests/", "benchmarks/", ".github/", "docs/", "matrix.yaml", "schema/")


def build(out: Path) -> dict[str, Path]:
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        env={"PATH": str(BIN), "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, "HOME": str(out)},
        capture_output=True,
        check=True,
    )
    return {p.suffix: p for p in out.iterdir()}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_the_release_package_and_its_metadata_only(
    dists: dict[str, Path],
) -> None:
    wheel = dists[".whl"]
    assert wheel.name == f"{NAME}-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"{NAME}-{__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"{NAME}-{__version__}.dist-info/entry_points.txt").decode()
    outside = [
        n for n in names if not n.startswith(("release/", f"{NAME}-{__version__}.dist-info/"))
    ]
    assert outside == []
    assert "release/cli.py" in names
    assert f"Version: {__version__}\n" in metadata
    assert "release = release.cli:console_main" in entry_points


def test_the_sdist_holds_the_tool_the_readme_and_the_licence_only(
    dists: dict[str, Path],
) -> None:
    sdist = dists[".gz"]
    assert sdist.name == f"{NAME}-{__version__}.tar.gz"
    top = f"{NAME}-{__version__}/"
    with tarfile.open(sdist) as archive:
        names = [m.name.removeprefix(top) for m in archive.getmembers() if m.isfile()]
    assert [n for n in names if n.startswith(NOT_THE_TOOL)] == []
    assert {n for n in names if not n.startswith("release/")} == {
        "PKG-INFO", "pyproject.toml", "README.md", "LICENSE", ".gitignore",
    }  # fmt: skip
    assert "release/__init__.py" in names


def test_a_rebuild_gives_the_same_bytes(dists: dict[str, Path], tmp_path: Path) -> None:
    again = build(tmp_path)
    for suffix, path in dists.items():
        first = hashlib.sha256(path.read_bytes()).hexdigest()
        assert hashlib.sha256(again[suffix].read_bytes()).hexdigest() == first, path.name


def test_twine_check_and_check_wheel_contents_pass(dists: dict[str, Path]) -> None:
    twine = subprocess.run(
        [str(BIN / "twine"), "check", "--strict", *map(str, dists.values())],
        capture_output=True,
        text=True,
        check=False,
    )
    assert twine.returncode == 0, twine.stdout + twine.stderr
    contents = subprocess.run(
        [str(BIN / "check-wheel-contents"), str(dists[".whl"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert contents.returncode == 0, contents.stdout + contents.stderr
