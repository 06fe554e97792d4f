"""`release build` through a prepare step, end to end, on the cmake fixture released from a
subdirectory (tests/fixtures/cmake_kernels as kernels_src/, its version dynamic) and staged
by a script into staged/ with the version from kernels_src/VERSION, in a git checkout of its
own: the script runs in the cell's build environment (CUDA_HOME, RELEASE_PREPARE), the
staged directory is what builds, the wheel has the version the version file gave, and the
checkout is as it was (the version file's bytes, no staged/). One SM: the SM list is not
what this checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release.toolchain import host_machine

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cmake_kernels"
RELEASE = Path(sys.executable).with_name("release")
GIT = shutil.which("git") or "git"

MATRIX = """\
project: kernels_src
build:
  backend: cmake
  prepare:
    command: bash stage.sh
    version-file: kernels_src/VERSION
    output: staged
defaults: {arches: [x86_64], sms: [90], ptx: 90, manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""

STAGE = """\
set -euo pipefail
echo "staging with CUDA_HOME=${CUDA_HOME} RELEASE_PREPARE=${RELEASE_PREPARE}"
rm -rf staged
cp -r kernels_src staged
version=$(tr -d '[:space:]' < kernels_src/VERSION)
python3 - "$version" <<'PY'
import pathlib, sys
staged = pathlib.Path("staged/pyproject.toml")
text = staged.read_text()
staged.write_text(text.replace('dynamic = ["version"]', f'version = "{sys.argv[1]}"'))
PY
"""


def git(where: Path, *args: str) -> str:
    return subprocess.run(
        [GIT, "-C", str(where), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def test_a_release_staged_by_a_script_builds_the_staged_directory(
    tmp_path: Path, release_cache: Path
) -> None:
    if host_machine() != "x86_64":
        pytest.skip("the cmake backend builds x86_64 cells on x86_64 machines only")
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root / "kernels_src", ignore=shutil.ignore_patterns("matrix.yaml"))
    pyproject = root / "kernels_src" / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('version = "0.2.0"', 'dynamic = ["version"]')
    )
    (root / "kernels_src" / "VERSION").write_text("0.0.0\n")
    (root / "matrix.yaml").write_text(MATRIX)
    (root / "stage.sh").write_text(STAGE)
    (root / ".gitignore").write_text("staged/\ndist/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c")
    (root / "kernels_src" / "VERSION").write_text("0.3.1\n")  # as the release workflow writes it
    status = git(root, "status", "--porcelain", "--ignored")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELEASE_", "PIP_"))}
    env["RELEASE_CACHE_DIR"] = str(release_cache)
    done = subprocess.run(
        [str(RELEASE), "build", "--json", "--cuda", "13.0", "--arch", "x86_64"],
        cwd=root, env=env, capture_output=True, text=True, check=False, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["wheel"] == "fixture_cmake_kernels-0.3.1-py3-none-manylinux_2_34_x86_64.whl"
    assert (root / "dist" / cell["wheel"]).is_file()
    text = Path(cell["log"]).read_text()
    assert "bash stage.sh" in text
    assert "staging with CUDA_HOME=/" in text
    assert "RELEASE_PREPARE=1" in text
    # the checkout as it was: the version the workflow wrote, no staged/ (dist/ is new)
    assert (root / "kernels_src" / "VERSION").read_text() == "0.3.1\n"
    assert not (root / "staged").exists()
    after = git(root, "status", "--porcelain", "--ignored")
    assert [line for line in after.splitlines() if "dist/" not in line] == status.splitlines()
