"""No backend writes into the project's checkout: a cmake cell of a setuptools project (a
setup.py that drives the build, as DeepGEMM's root one does) builds with the inputs the
build stage gives it, and `git status` of the checkout is empty afterwards, its ignored
files included (setuptools would write build/ and <name>.egg-info/ there). A real PEP 517
build of a project without a compiled part, in this tool's own environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from release.backends import BuildContext, NvccToolkit, build_inputs
from release.building.pipeline import build_command, cell_environment
from release.matrix import load_matrix
from release.toolchain.buildenv import cell_targets

GIT = shutil.which("git") or "git"

MATRIX = """\
project: project
build: {backend: cmake}
defaults: {arches: [x86_64], manylinux: "2_28", device-code: none}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""


def git(checkout: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(checkout),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        [GIT, "-C", str(checkout), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def checkout(root: Path) -> Path:
    project = root / "project"
    (project / "jit_kernels").mkdir(parents=True)
    (project / "jit_kernels" / "__init__.py").write_text("VERSION = '0.1.0'\n")
    (project / "setup.py").write_text(
        "from setuptools import setup\n\n"
        "setup(name='jit-kernels', version='0.1.0', packages=['jit_kernels'])\n"
    )
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    (root / "matrix.yaml").write_text(MATRIX)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "the project")
    return project


def test_a_cmake_cell_of_a_setuptools_project_leaves_the_checkout_as_it_was(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    project = checkout(root)
    (cell,) = load_matrix(root / "matrix.yaml").cells
    staging = tmp_path / "dist" / f".{cell.id}.staging"
    context = BuildContext(
        toolkit=NvccToolkit(root=tmp_path / "cuda-home", version="13.0.88"),
        project_dir=project,
        build_dir=staging / "build",
    )
    inputs = build_inputs(cell_targets(cell), context)
    for path, text in inputs.files.items():  # as the pipeline writes them before the build
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    env = cell_environment(inputs, base=base, python=sys.executable, epoch=1700000000)
    out = staging / "built"
    command = build_command(sys.executable, project, out, isolated=False)
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [w.name for w in out.glob("*.whl")] == ["jit_kernels-0.1.0-py3-none-any.whl"]
    assert git(root, "status", "--porcelain", "--ignored") == ""
    assert (staging / "build" / "jit_kernels.egg-info").is_dir()  # where it went instead
