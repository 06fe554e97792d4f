"""A project that does not name itself in pyproject.toml: which matrix loads it, what the
backend's METADATA gives, the cache entry's name, and the torch cell whose venv runs the
hook (the processes themselves: tests/integration/test_project_metadata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError
from release.matrix import Matrix, matrix_from_text
from release.matrix.load import read_project
from release.toolchain import host_machine
from release.toolchain.projectmeta import cache_key, from_metadata, hook_cell

MATRIX = """\
project: proj
build: {backend: torch}
defaults: {arches: [x86_64, aarch64], sms: [90], manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi, torch: "2.14.1", abi3: "3.10"}
destinations:
  pypi: {kind: pypi}
"""


def setup_py_project(tmp_path: Path) -> Path:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    return tmp_path / "matrix.yaml"


def test_a_project_without_static_name_and_version_is_its_backends_to_name(
    tmp_path: Path,
) -> None:
    setup_py_project(tmp_path)
    assert read_project(tmp_path / "proj") is None
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndynamic = ["version"]\n'
    )
    assert read_project(tmp_path / "proj") is None
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.0"\n')
    assert read_project(tmp_path / "proj") == ("x", Version("1.0"))
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "../x"\nversion = "1"\n')
    assert "is not a valid project name" in str(read_project(tmp_path / "proj"))
    (tmp_path / "proj" / "pyproject.toml").unlink()
    (tmp_path / "proj" / "setup.py").unlink()
    assert "does not exist" in str(read_project(tmp_path / "proj"))


def test_the_backend_is_asked_with_the_matrix_as_it_would_be_and_its_answer_names_the_cells(
    tmp_path: Path,
) -> None:
    path = setup_py_project(tmp_path)
    asked: list[Matrix] = []

    def backend(provisional: Matrix) -> tuple[str, Version]:
        asked.append(provisional)
        return "k3-ops", Version("0.2.0.post3")

    matrix = matrix_from_text(path.read_text(), path, backend)
    (provisional,) = asked
    assert [c.id for c in provisional.cells] == [c.id for c in matrix.cells]
    assert (matrix.project.name, str(matrix.project.version)) == ("k3-ops", "0.2.0.post3")
    assert matrix.cells[0].wheel_filename.startswith("k3_ops-0.2.0.post3-cp310-abi3-")


def test_without_a_backend_to_ask_such_a_project_is_an_error_naming_the_remedy(
    tmp_path: Path,
) -> None:
    path = setup_py_project(tmp_path)
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(path.read_text(), path)
    assert "no static [project] name and version (add them" in caught.value.problems[0]


def test_a_matrix_with_problems_is_refused_before_the_backend_is_asked(tmp_path: Path) -> None:
    path = setup_py_project(tmp_path)
    broken = MATRIX.replace('manylinux: "2_34"', 'manylinux: "2_3"')

    def backend(provisional: Matrix) -> tuple[str, Version]:
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
    matrix = matrix_from_text(MATRIX, path, lambda m: ("k3-ops", Version("1")))
    chosen = hook_cell(matrix)
    assert chosen is not None
    assert chosen.arch == host_machine()
    plain = MATRIX.replace("build: {backend: torch}", "build: {backend: cmake}").replace(
        ', torch: "2.14.1", abi3: "3.10"', ""
    )
    assert hook_cell(matrix_from_text(plain, path, lambda m: ("k3-ops", Version("1")))) is None
