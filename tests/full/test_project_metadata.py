"""A project whose files compute its version (a setup.py that reads it at run time):
`release` says so, then asks its PEP 517 backend for the name and version, beside the
pinned torch for a torch project (its setup.py imports torch), once per commit, writing
nothing into the checkout; a backend that fails is a one-line error in its own words.
(Literal names and versions are read without the backend: tests/unit/test_projectmeta.py,
tests/integration/test_init.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release.toolchain import host_machine
from release.toolchain.torchenv import TorchEnv
from tests.integration.test_version_file import git

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_ops"
GIT = shutil.which("git") or "git"
CLI = "import sys; from release.cli import main; sys.exit(main(sys.argv[1:]))"

TORCH_MATRIX = """\
project: proj
build: {backend: torch, env: {FORCE_CUDA: "1"}}
defaults: {arches: [x86_64], sms: [90], manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10"}
destinations:
  pypi: {kind: pypi}
"""

# Counts the backend's runs in $HOOK_RUNS: the setup.py of a test project, not the tool.
COUNTER = 'if os.environ.get("HOOK_RUNS"):\n    open(os.environ["HOOK_RUNS"], "a").write("x")\n'
# A common guard: a setup.py that refuses to run without the cell's arch list (and a switch
# of its own, set in the matrix's build.env), the metadata step included.
GUARD = (
    'if os.environ.get("TORCH_CUDA_ARCH_LIST") != "9.0+PTX" or not os.environ.get("CUDA_HOME") '
    'or os.environ.get("FORCE_CUDA") != "1":\n'
    '    raise RuntimeError("CUDAArchListError: set TORCH_CUDA_ARCH_LIST")\n'
)


def setup_py_only(where: Path) -> Path:
    """The torch fixture as a setup.py project: [build-system] alone in pyproject.toml,
    name, a computed version and packages given to setup(), in a git checkout of its own."""
    shutil.copytree(FIXTURE, where, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    pyproject = (where / "pyproject.toml").read_text(encoding="utf-8")
    kept = pyproject[: pyproject.index("[project]")] + pyproject[pyproject.index("[tool.pytest") :]
    (where / "pyproject.toml").write_text(kept, encoding="utf-8")
    setup = (where / "setup.py").read_text(encoding="utf-8")
    setup = setup.replace(
        "setup(\n",
        COUNTER + GUARD + 'setup(\n    name="k3-torch-ops",\n    version="0.3.0.post1".strip(),\n'
        '    package_dir={"": "src"},\n    packages=["k3_torch_ops"],\n',
        1,
    )
    (where / "setup.py").write_text(setup, encoding="utf-8")
    git(where, "init", "-q", ".")
    git(where, "add", "-A")
    git(where, "commit", "-qm", "a setup.py project")
    return where


def release_matrix(root: Path, cache: Path, runs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "matrix", "--matrix", str(root / "matrix.yaml"), "--json"],
        capture_output=True, text=True, check=False, cwd=root,
        env={**os.environ, "RELEASE_CACHE_DIR": str(cache), "HOOK_RUNS": str(runs)},
    )  # fmt: skip


def torch_environments(toolchains: Path) -> list[str]:
    return sorted(p.name for p in toolchains.glob("torch-*") if p.is_dir())


def named(done: subprocess.CompletedProcess[str]) -> tuple[str, str, str]:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)
    return document["project"], document["version"], document["cells"][0]["wheel"]


def test_a_setup_py_torch_project_is_named_by_its_backend_once_per_commit(
    torch_environment: TorchEnv, release_cache: Path, tmp_path: Path
) -> None:
    if host_machine() != "x86_64":
        pytest.skip("the matrix is an x86_64 one")
    project = setup_py_only(tmp_path / "proj")
    (tmp_path / "matrix.yaml").write_text(TORCH_MATRIX, encoding="utf-8")
    runs = tmp_path / "runs"
    # a separate cache root for the answers; the toolchains (the session's torch
    # environment) are shared
    cache = tmp_path / "cache"
    cache.mkdir()
    (release_cache / "toolchains").mkdir(exist_ok=True)  # a fresh cache has none yet
    (cache / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
    environments = torch_environments(cache / "toolchains")
    assert torch_environment.root.name in environments

    asked = release_matrix(tmp_path, cache, runs)
    assert "setup.py:" in asked.stderr
    assert "the version is computed" in asked.stderr
    assert "this provisions nvcc for CUDA 13.0 and torch 2.14.1" in asked.stderr
    first = named(asked)
    assert first == (
        "k3-torch-ops",
        "0.3.0.post1",
        "k3_torch_ops-0.3.0.post1-cp310-abi3-manylinux_2_34_x86_64.whl",
    )
    assert runs.read_text() == "x"  # setup.py ran (it imports torch: beside the pinned one)
    assert len(list((cache / "metadata").glob("*.json"))) == 1
    again = release_matrix(tmp_path, cache, runs)
    assert named(again) == first
    assert runs.read_text() == "x"  # the same commit: the kept answer
    assert "asking the build backend" not in again.stderr  # nothing asked, nothing said
    status = subprocess.run(
        [GIT, "-C", str(project), "status", "--porcelain", "--ignored"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert status.stdout == ""  # no egg-info, no build/: nothing written into the checkout

    setup = project / "setup.py"
    setup.write_text(setup.read_text().replace("0.3.0.post1", "0.3.0.post2"), encoding="utf-8")
    assert named(release_matrix(tmp_path, cache, runs))[1] == "0.3.0.post2"
    assert named(release_matrix(tmp_path, cache, runs))[1] == "0.3.0.post2"
    assert runs.read_text() == "xxx"  # a changed checkout is asked every time
    git(project, "commit", "-qam", "post2")
    assert named(release_matrix(tmp_path, cache, runs))[1] == "0.3.0.post2"
    assert named(release_matrix(tmp_path, cache, runs))[1] == "0.3.0.post2"
    assert runs.read_text() == "xxxx"  # the new commit: asked once, then kept
    assert len(list((cache / "metadata").glob("*.json"))) == 2
    assert torch_environments(cache / "toolchains") == environments  # no other one made


PLAIN_MATRIX = """\
project: plain
build: {backend: cmake}
defaults: {arches: [x86_64], sms: [90], manylinux: "2_28"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""


def test_another_project_is_asked_in_an_isolated_environment_and_its_failure_is_one_line(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "setup.py").write_text(
        "from setuptools import setup\n"
        'setup(name="plain-kernels", version="2.3.4".strip(), py_modules=[])\n',
        encoding="utf-8",
    )
    (tmp_path / "matrix.yaml").write_text(PLAIN_MATRIX, encoding="utf-8")
    runs = tmp_path / "runs"
    asked = release_matrix(tmp_path, tmp_path / "cache", runs)
    assert "in an isolated environment of its build requirements" in asked.stderr
    project, version, _ = named(asked)
    assert (project, version) == ("plain-kernels", "2.3.4")
    assert sorted(p.name for p in plain.iterdir()) == ["setup.py"]

    with (plain / "setup.py").open("a", encoding="utf-8") as f:
        f.write('raise SystemExit("plain-kernels needs PLAIN_HOME set")\n')
    failed = release_matrix(tmp_path, tmp_path / "cache", runs)
    assert failed.returncode == 2
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("error:")]
    assert f"{plain / 'setup.py'}: no static [project] name and version" in line
    assert "plain-kernels needs PLAIN_HOME set" in line
    assert "Traceback" not in failed.stderr
    document = json.loads(failed.stdout)  # --json's one document, which says it failed
    assert (document["ok"], document["error"]["exit_code"]) == (False, 2)

    # the matrix's build.env reaches the metadata step as it reaches the build
    guarded = (
        (plain / "setup.py")
        .read_text(encoding="utf-8")
        .replace(
            'raise SystemExit("plain-kernels needs PLAIN_HOME set")',
            'import os\nif not os.environ.get("PLAIN_HOME"):\n'
            '    raise SystemExit("plain-kernels needs PLAIN_HOME set")',
        )
    )
    (plain / "setup.py").write_text(guarded, encoding="utf-8")
    (tmp_path / "matrix.yaml").write_text(
        PLAIN_MATRIX.replace("{backend: cmake}", '{backend: cmake, env: {PLAIN_HOME: "/opt/p"}}'),
        encoding="utf-8",
    )
    assert named(release_matrix(tmp_path, tmp_path / "cache", runs))[:2] == (
        "plain-kernels",
        "2.3.4",
    )
