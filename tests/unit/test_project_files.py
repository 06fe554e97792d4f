"""release.project.files: a project's name and version from its files together, and where
each is computed when no file states it."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.project import Naming, naming, read_project_files, reading

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def named(tmp_path: Path, files: dict[str, str]) -> Naming:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return naming(reading(read_project_files(tmp_path)))


def test_the_fixtures_name_themselves_in_pyproject_toml() -> None:
    for fixture, expected in (
        ("torch_ops", ("k3-torch-ops", "0.1.0")),
        ("cmake_kernels", ("fixture-cmake-kernels", "0.2.0")),
        ("extension_template", ("muladd_ops", "0.0.1")),
    ):
        said = naming(reading(read_project_files(FIXTURES / fixture)))
        assert said.static is not None
        assert (said.static[0], str(said.static[1])) == expected


def test_a_setup_py_project_is_named_by_setup_and_setup_cfg(tmp_path: Path) -> None:
    said = named(
        tmp_path,
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools", "torch"]\n',
            "setup.py": 'from setuptools import setup\nsetup(version="1.2.3")\n',
            "setup.cfg": "[metadata]\nname = k3-ops\n",
        },
    )
    assert said.static is not None
    assert said.static[0] == "k3-ops"
    assert said.name is not None
    assert str(said.name.place) == "setup.cfg:2"
    assert said.version is not None
    assert str(said.version.place) == "setup.py:2"


def test_a_dynamic_version_is_read_where_setuptools_would_read_it(tmp_path: Path) -> None:
    said = named(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "k3-ops"\ndynamic = ["version"]\n'
            '[tool.setuptools.dynamic]\nversion = {attr = "k3_ops.__version__"}\n',
            "src/k3_ops/__init__.py": '"""k3."""\n__version__ = "0.7.0"\n',
        },
    )
    assert said.static is not None
    assert str(said.static[1]) == "0.7.0"
    assert said.version is not None
    assert str(said.version.place) == "src/k3_ops/__init__.py:2"


@pytest.mark.parametrize(
    ("files", "where"),
    [
        (
            {"pyproject.toml": '[project]\nname = "k3-ops"\ndynamic = ["version"]\n'},
            "pyproject.toml:3: the version is dynamic",
        ),
        (
            {"setup.py": "from setuptools import setup\nsetup(name='k', version=v())\n"},
            "setup.py:2: the version is computed (v())",
        ),
    ],
)
def test_what_is_computed_is_said_with_its_place(
    tmp_path: Path, files: dict[str, str], where: str
) -> None:
    said = named(tmp_path, files)
    assert said.static is None
    assert said.problem is None
    assert said.unsaid(tmp_path) == f"{tmp_path}/{where}"


def test_bad_names_and_versions_are_problems_no_backend_could_fix(tmp_path: Path) -> None:
    bad_name = named(
        tmp_path / "a", {"pyproject.toml": '[project]\nname = "../x"\nversion = "1"\n'}
    )
    assert bad_name.problem == (
        f"{tmp_path}/a/pyproject.toml:2: name '../x' is not a valid project name (PEP 508)"
    )
    bad_version = named(tmp_path / "b", {"setup.py": "setup(name='x', version='one')\n"})
    assert bad_version.problem == f"{tmp_path}/b/setup.py:1: version 'one' is not PEP 440"
    assert "does not exist" in str(named(tmp_path / "c", {}).problem)
