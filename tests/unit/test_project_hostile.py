"""A project tree built to hurt its reader: each is read in bounded time and memory, and
refused in one line or read as saying nothing, never a traceback (init, matrix and the dry
run read these files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from release.cli import main
from release.errors import ConfigError
from release.init.run import InitSettings, init_project
from release.matrix import load_matrix
from release.project import read_project_files
from release.project.cmakelists import commands
from release.project.native import native_of_setup_py
from release.project.places import TomlPlaces
from release.project.pyproject import read_pyproject
from release.project.pysource import decode_python
from release.project.setuppy import read_setup_py
from release.project.staging import _expand

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_sum_of_thousands_of_terms_is_read_or_refused_never_a_recursion_error() -> None:
    libraries = "+".join(["L"] * 2500)  # compiles; walked without recursion
    read = native_of_setup_py(f"L = ['-lnvrtc']\nsetup(libraries={libraries})\n")
    assert [lib.value for lib in read.linked({"nvrtc"})] == ["nvrtc"]
    deeper = "+".join(["1"] * 5000)  # past the parser's own limit: says nothing
    assert native_of_setup_py(f'x = f"{{{deeper}}}.cu"\n').units == ()
    problem = read_setup_py(f"v = {deeper}\n").problem
    assert problem is not None
    assert "not Python" in problem


def test_a_list_that_doubles_itself_is_held_to_a_bound() -> None:
    doubling = "a = ['-lcudart']\n" + "a = [*a, *a]\n" * 40 + "setup(libraries=a)\n"
    assert len(native_of_setup_py(doubling).libraries) <= 1001


def test_a_coding_that_is_no_text_encoding_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"setup.py: rot13 is not a text encoding"):
        decode_python(b"# -*- coding: rot13 -*-\nvzcbeg bf\n", "setup.py")


def test_numbers_of_more_digits_than_python_converts_are_no_targets_or_pythons() -> None:
    digits = "9" * 5000
    pyproject = (
        '[project]\nname = "k3"\nversion = "1"\n'
        f'classifiers = ["Programming Language :: Python :: 3.{digits}"]\n'
    )
    read = read_pyproject(pyproject)
    assert read is not None
    assert read.pythons == ()


def test_toml_lines_are_found_in_one_pass_in_array_order() -> None:
    text = (
        '[build-system]\nrequires = [\n  "setuptools",\n  "torch",\n  "tvm-ffi",\n]\n'
        '[project]\nname = "x"\n'
    )
    places = TomlPlaces(text, ("build-system", "project"))
    assert places.lines("build-system", "requires", ["setuptools", "torch", "nope"]) == [
        3, 4, 2  # one not found is placed at the key's line
    ]  # fmt: skip
    assert places.line("build-system", "requires") == 2
    assert places.line("project", "name") == 8
    assert places.lines("build-system", "requires", []) == []


@pytest.mark.timeout(60)  # each took minutes: quadratic in the text's size
def test_big_build_files_are_read_in_time_linear_in_their_size() -> None:
    requires = ",".join(['"torch"'] * 100_000)
    read = read_pyproject(f"[build-system]\nrequires = [{requires}]\n")
    assert read is not None
    assert len(read.requires) == 100_000
    spaces = "[a" + " " * 60_000 + "x\n"  # a line the table pattern once backtracked over
    text = f'x = """\n{spaces}"""\n[project]\nname = "k"\n'
    assert TomlPlaces(text, ("project",)).line("project", "name") == 5
    cmake = "project(x LANGUAGES CUDA)\n" + "set(A 1)\n" * 100_000
    assert commands(cmake)[-1].line == 100_001


def test_a_variable_that_doubles_as_it_expands_is_not_followed() -> None:
    variables = {"A": "$A$A"}
    assert _expand("$A/x", variables) is None


def test_a_build_file_past_its_bound_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "k3"\nversion = "1"\n')
    with (tmp_path / "setup.py").open("wb") as sparse:
        sparse.truncate(65 * 2**20)  # a file of a gigabyte took 2 GB of memory to read
    with pytest.raises(ConfigError, match=r"setup.py: larger than 64 MiB"):
        read_project_files(tmp_path)


def test_a_build_file_past_its_bound_is_a_problem_at_matrix_yamls_project_line(
    tmp_path: Path,
) -> None:
    # exit 8 with no matrix.yaml:LINE:COL, where a too deep one was exit 2 at `project:`
    project = tmp_path / "proj"
    project.mkdir()
    with (project / "pyproject.toml").open("wb") as sparse:
        sparse.truncate(65 * 2**20)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "destinations: {pypi: {kind: pypi}}\nproject: proj\ncuda: {'13.0': {destination: pypi}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_matrix(matrix)
    assert caught.value.exit_code == 2
    assert caught.value.problems == (
        f"matrix.yaml:2:10: project: {project / 'pyproject.toml'}: larger than 64 MiB, which "
        "no build file is",
    )


def test_init_writes_no_value_of_the_environments_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged distribution's VERSION linked to /proc/self/environ put the whole
    environment, tokens included, into matrix.yaml's comments."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "jit_gemm", project)
    (project / "matrix.yaml").unlink(missing_ok=True)
    secret = "SECRETSENTINEL_" + "x" * 12
    monkeypatch.setenv("MY_TOKEN", secret)
    (project / "sgl_k3_jit" / "VERSION").write_bytes(f"MY_TOKEN={secret}\0HOME=/root\0".encode())
    assert main(["init", "--offline", str(project)]) == 0  # the version: a problem it says
    written = project / "matrix.yaml"
    assert written.exists()
    assert secret not in written.read_text()


def test_init_force_replaces_a_link_to_dev_zero_without_reading_it(tmp_path: Path) -> None:
    """The file init replaces was read whole, to put back should the other write fail: a
    matrix.yaml linked to /dev/zero never ended."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "jit_gemm", project)
    (project / "matrix.yaml").unlink(missing_ok=True)
    (project / "matrix.yaml").symlink_to("/dev/zero")
    init_project(InitSettings(directory=project, offline=True, force=True))
    assert not (project / "matrix.yaml").is_symlink()
    assert (project / "matrix.yaml").read_text().startswith("# yaml-language-server")
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".matrix")) == []
