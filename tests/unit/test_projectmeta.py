"""A project whose files compute its name or version: which matrix loads it, what the
backend's METADATA gives, the cache entry's name, the torch cell whose venv runs the hook,
and what a command says before it asks (the processes themselves:
tests/integration/test_project_metadata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError
from release.matrix import Matrix, matrix_from_text
from release.matrix.load import read_project
from release.project import Naming
from release.toolchain import host_machine
from release.toolchain.projectmeta import (
    asking_note,
    cache_key,
    from_metadata,
    hook_cell,
    hook_environment,
)

MATRIX = """\
project: proj
build: {backend: torch}
defaults: {arches: [x86_64, aarch64], sms: [90], manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10"}
destinations:
  pypi: {kind: pypi}
"""


SETUP_PY = """\
from setuptools import setup
setup(name="k3-ops", version=open("VERSION").read().strip())
"""


def setup_py_project(tmp_path: Path) -> Path:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "setup.py").write_text(SETUP_PY)
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    return tmp_path / "matrix.yaml"


def test_a_project_whose_files_compute_its_version_is_its_backends_to_name(
    tmp_path: Path,
) -> None:
    setup_py_project(tmp_path)
    said = read_project(tmp_path / "proj")
    assert said.static is None
    assert [(what, str(s.place) if s else None) for what, s in said.computed()] == [
        ("version", "setup.py:2")
    ]
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndynamic = ["version"]\n'
    )
    assert read_project(tmp_path / "proj").static is None  # setup.py's version is computed
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.0"\n')
    assert read_project(tmp_path / "proj").static == ("x", Version("1.0"))
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "../x"\nversion = "1"\n')
    assert "is not a valid project name" in str(read_project(tmp_path / "proj").problem)
    (tmp_path / "proj" / "pyproject.toml").unlink()
    (tmp_path / "proj" / "setup.py").unlink()
    assert "does not exist" in str(read_project(tmp_path / "proj").problem)


def test_literals_in_setup_py_name_the_project_without_its_backend(tmp_path: Path) -> None:
    path = setup_py_project(tmp_path)
    (tmp_path / "proj" / "setup.py").write_text(
        'from setuptools import setup\nNAME = "k3-ops"\nsetup(name=NAME, version="0.4.1")\n'
    )

    def backend(provisional: Matrix, naming: Naming) -> tuple[str, Version]:
        raise AssertionError("asked the backend for a project that names itself")

    matrix = matrix_from_text(path.read_text(), path, backend)
    assert (matrix.project.name, str(matrix.project.version)) == ("k3-ops", "0.4.1")


def test_the_backend_is_asked_with_the_matrix_as_it_would_be_and_its_answer_names_the_cells(
    tmp_path: Path,
) -> None:
    path = setup_py_project(tmp_path)
    asked: list[tuple[Matrix, Naming]] = []

    def backend(provisional: Matrix, naming: Naming) -> tuple[str, Version]:
        asked.append((provisional, naming))
        return "k3-ops", Version("0.2.0.post3")

    matrix = matrix_from_text(path.read_text(), path, backend)
    ((provisional, naming),) = asked
    assert naming.name is not None
    assert naming.name.value == "k3-ops"
    assert [c.id for c in provisional.cells] == [c.id for c in matrix.cells]
    assert (matrix.project.name, str(matrix.project.version)) == ("k3-ops", "0.2.0.post3")
    assert matrix.cells[0].wheel_filename.startswith("k3_ops-0.2.0.post3-cp310-abi3-")


def test_without_a_backend_to_ask_such_a_project_is_an_error_naming_the_remedy(
    tmp_path: Path,
) -> None:
    path = setup_py_project(tmp_path)
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(path.read_text(), path)
    (problem,) = caught.value.problems
    assert f"{tmp_path / 'proj' / 'setup.py'}:2: the version is computed (open(" in problem
    assert "write them as literals in pyproject.toml's [project] or setup.py" in problem


def test_a_matrix_with_problems_is_refused_before_the_backend_is_asked(tmp_path: Path) -> None:
    path = setup_py_project(tmp_path)
    broken = MATRIX.replace('manylinux: "2_34"', 'manylinux: "2_3"')

    def backend(provisional: Matrix, naming: Naming) -> tuple[str, Version]:
        raise AssertionError("asked the backend for a matrix that cannot load")

    with pytest.raises(ConfigError):
        matrix_from_text(broken, path, backend)


def test_metadata_text_gives_name_and_version_or_a_clear_error(tmp_path: Path) -> None:
    text = "Metadata-Version: 2.1\nName: k3-ops\nVersion: 0.2.0\nRequires-Dist: torch\n"
    found = from_metadata(text, tmp_path / "setup.py")
    assert (found.name, found.version) == ("k3-ops", Version("0.2.0"))
    with pytest.raises(ConfigError, match="no usable name and version"):
        from_metadata("Metadata-Version: 2.1\nName: k3-ops\nVersion: not a version\n", tmp_path)
    with pytest.raises(ConfigError, match="no usable name and version"):
        from_metadata("Metadata-Version: 2.1\nName: ../../etc\nVersion: 1.0\n", tmp_path)


def test_the_cache_entry_is_the_commit_and_the_projects_place_in_the_checkout() -> None:
    assert cache_key("a" * 40, "") == cache_key("a" * 40, "")
    assert cache_key("a" * 40, "") != cache_key("b" * 40, "")
    assert cache_key("a" * 40, "kernels/") != cache_key("a" * 40, "")


def test_the_hook_runs_beside_a_torch_of_this_machines_arch(tmp_path: Path) -> None:
    path = setup_py_project(tmp_path)
    matrix = matrix_from_text(MATRIX, path, lambda m, n: ("k3-ops", Version("1")))
    chosen = hook_cell(matrix)
    assert chosen is not None
    assert chosen.arch == host_machine()
    plain = MATRIX.replace("build: {backend: torch}", "build: {backend: cmake}").replace(
        ', torch: "2.14.1", abi3: "3.10"', ""
    )
    assert hook_cell(matrix_from_text(plain, path, lambda m, n: ("k3-ops", Version("1")))) is None


def test_before_asking_a_command_says_where_the_version_is_computed_and_what_it_installs(
    tmp_path: Path,
) -> None:
    path = setup_py_project(tmp_path)
    matrix = matrix_from_text(MATRIX, path, lambda m, n: ("k3-ops", Version("1")))
    note = asking_note(matrix, read_project(tmp_path / "proj"), tmp_path / "toolchains")
    assert note.startswith(
        f"{tmp_path / 'proj' / 'setup.py'}:2: the version is computed "
        '(open("VERSION").read().strip()): asking the build backend'
    )
    assert "nvcc for CUDA 13.0 and torch 2.14.1" in note
    assert str(tmp_path / "toolchains") in note
    plain = MATRIX.replace("build: {backend: torch}", "build: {backend: cmake}").replace(
        ', torch: "2.14.1", abi3: "3.10"', ""
    )
    matrix = matrix_from_text(plain, path, lambda m, n: ("k3-ops", Version("1")))
    note = asking_note(matrix, read_project(tmp_path / "proj"), tmp_path / "toolchains")
    assert "in an isolated environment of its build requirements" in note
    assert "torch" not in note


def test_the_hook_gets_the_cells_arch_list_cuda_home_and_build_env(tmp_path: Path) -> None:
    """The metadata step runs in the cell's own build environment (issue 43): a setup.py
    guard that refuses to run without TORCH_CUDA_ARCH_LIST must not stop it."""
    path = setup_py_project(tmp_path)
    text = MATRIX.replace(
        "build: {backend: torch}", 'build: {backend: torch, env: {FORCE_CUDA: "1"}}'
    )
    text = text.replace("sms: [90]", "sms: [80, 90], ptx: 90")
    matrix = matrix_from_text(text, path, lambda m, n: ("k3-ops", Version("1")))
    cell = hook_cell(matrix)
    assert hook_environment(cell, Path("/toolkits/torch/cuda")) == {
        "TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX",
        "CUDA_HOME": "/toolkits/torch/cuda",
        "FORCE_CUDA": "1",
    }
    assert hook_environment(cell, None) == {"FORCE_CUDA": "1"}  # an isolated environment
    assert hook_environment(None, None) == {}
