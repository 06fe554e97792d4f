"""A CMake project that runs nvcc its own ways builds, its device code held to its own
compiles (tests/fixtures/cmake_own_launcher): a CUDA compiler launcher of its own (sccache,
set in its CMakeLists.txt: sccache runs nvcc's parts itself, so only a wrapper in front
of it sees the object written), an object compiled by a custom command that runs
${CMAKE_CUDA_COMPILER} and linked into the library, and a fatbin compiled the same way
and shipped as package data. Before the compile wrapper sat in front of the project's
launcher and behind CMAKE_CUDA_COMPILER, this cell failed as "not built here"."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cmake_own_launcher"
CLI = "import sys; from release.cli import main; sys.exit(main(sys.argv[1:]))"
WHEEL = "fixture_own_launcher-0.1.0-py3-none-manylinux_2_34_x86_64.whl"


def test_device_code_of_the_projects_own_launcher_and_custom_commands_is_this_builds(
    release_cache: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"  # a cache of its own, the session's toolchains
    cache.mkdir()
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (cache / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
    built = subprocess.run(
        [sys.executable, "-c", CLI, "build", "--matrix", str(FIXTURE / "matrix.yaml"),
         "--out", str(tmp_path / "dist"), "--cache-dir", str(cache)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "dist" / WHEEL) as wheel:
        names = set(wheel.namelist())
    assert {"fixture_own_launcher/libfol.so", "fixture_own_launcher/kernels.fatbin"} <= names
