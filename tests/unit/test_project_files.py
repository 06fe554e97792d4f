"""release.project.files: a project's name and version from its files together, and where
each is computed when no file states it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release.errors import ConfigError, FileError
from release.project import Naming, naming, read_project_files, read_version_file, reading

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


# The version function of flash-attention's kind (mamba-ssm and causal-conv1d spell the
# package through a constant): the public version from the package's __init__.py, a local
# label from a variable.
VERSION_FUNCTION = """\
import ast
import os
import re
from pathlib import Path

from setuptools import setup

this_dir = os.path.dirname(os.path.abspath(__file__))
PACKAGE_NAME = "kernels_ssm"


def get_package_version():
    with open(Path(this_dir) / {path} / "__init__.py", "r") as f:
        version_match = re.search(r"^__version__\\s*=\\s*(.*)$", f.read(), re.MULTILINE)
    public_version = ast.literal_eval(version_match.group(1))
    local_version = os.environ.get("KERNELS_SSM_LOCAL_VERSION")
    if local_version:
        return f"{{public_version}}+{{local_version}}"
    else:
        return str(public_version)


setup(name=PACKAGE_NAME, version=get_package_version())
"""


@pytest.mark.parametrize("path", ['"kernels_ssm"', "PACKAGE_NAME"])
def test_a_version_read_from_the_packages_init_is_read_statically(
    tmp_path: Path, path: str
) -> None:
    said = named(
        tmp_path,
        {
            "setup.py": VERSION_FUNCTION.format(path=path),
            "kernels_ssm/__init__.py": '"""Kernels."""\n\n__version__ = "2.8.3"\n',
        },
    )
    assert said.static is not None
    assert (said.static[0], str(said.static[1])) == ("kernels_ssm", "2.8.3")
    assert said.version is not None
    assert str(said.version.place) == "setup.py:23"
    assert str(said.version.via) == "kernels_ssm/__init__.py:3"
    assert said.version.expression == (
        "get_package_version(): __version__ of kernels_ssm/__init__.py, "
        "+$KERNELS_SSM_LOCAL_VERSION if set"
    )


def test_a_version_function_that_reads_no_literal_file_stays_computed(tmp_path: Path) -> None:
    # the file's name is computed: nothing to read without running it
    computed = VERSION_FUNCTION.format(path='"kernels_ssm"').replace(
        '/ "__init__.py"', '/ f"{os.sep}__init__.py"'
    )
    unread = named(tmp_path / "a", {"setup.py": computed})
    assert unread.static is None
    # the file is named but holds no literal __version__
    no_literal = named(
        tmp_path / "b",
        {
            "setup.py": VERSION_FUNCTION.format(path='"kernels_ssm"'),
            "kernels_ssm/__init__.py": "__version__ = open('VERSION').read()\n",
        },
    )
    assert no_literal.static is None
    assert no_literal.version is not None
    assert no_literal.version.expression == "get_package_version()"
    # a path out of the project is never read
    outside = named(
        tmp_path / "c",
        {"setup.py": VERSION_FUNCTION.format(path='".."')},
    )
    assert outside.static is None


def test_a_project_file_that_is_not_a_regular_file_is_a_file_error_never_a_hang(
    tmp_path: Path,
) -> None:
    (tmp_path / "setup.py").mkdir()
    with pytest.raises(FileError, match=r"setup\.py: it is not a regular file"):
        read_project_files(tmp_path)
    (tmp_path / "setup.py").rmdir()
    os.mkfifo(tmp_path / "setup.py")  # a blocking open would wait for a writer forever
    with pytest.raises(FileError, match=r"setup\.py: it is not a regular file"):
        read_project_files(tmp_path)
    (tmp_path / "setup.py").unlink()
    (tmp_path / "pyproject.toml").symlink_to(tmp_path / "pyproject.toml")
    with pytest.raises(FileError, match=r"pyproject\.toml: Too many levels of symbolic links"):
        read_project_files(tmp_path)
    assert FileError.exit_code == 8


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        (
            "pyproject.toml",
            b'[project]\nname = "k3"\ndescription = "caf\xe9"\n',
            "not UTF-8 (byte 0xe9 at line 3, column 19)",
        ),
        (
            "setup.cfg",
            b"[metadata]\nname = k3\nauthor = \xff\n",
            "not UTF-8 (byte 0xff at line 3, column 10)",
        ),
    ],
    ids=["pyproject", "setup-cfg"],
)
def test_a_build_file_that_is_not_utf8_is_named_with_its_line(
    tmp_path: Path, name: str, data: bytes, reason: str
) -> None:
    """Issue 49, F23: never read as empty ("no build system"); pip and build read both files
    as UTF-8 and would fail on it later."""
    (tmp_path / name).write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        read_project_files(tmp_path)
    assert caught.value.message == f"{tmp_path / name}: {reason}"


SUBDIRECTORY = (
    '[project]\nname = "sgl-tiny"\ndynamic = ["version"]\n\n'
    '[tool.setuptools.dynamic]\nversion = {file = "tiny/VERSION"}\n'
)


def test_a_prepare_steps_version_file_gives_a_computed_version(tmp_path: Path) -> None:
    project = tmp_path / "sgl_tiny"
    project.mkdir()
    (project / "pyproject.toml").write_text(SUBDIRECTORY, encoding="utf-8")
    read = reading(read_project_files(project))
    (project / "VERSION").write_text(" 0.1.5.post1\n", encoding="utf-8")
    said = naming(read, read_version_file(project / "VERSION", "VERSION"))
    assert said.static is not None
    assert (said.static[0], str(said.static[1])) == ("sgl-tiny", "0.1.5.post1")
    assert said.version is not None
    assert said.version.source() == "VERSION:1"
    # without one, the version stays dynamic: the build backend would be asked
    assert naming(read).static is None


def test_a_missing_or_empty_version_file_is_the_problem_at_its_path(tmp_path: Path) -> None:
    project = tmp_path / "sgl_tiny"
    project.mkdir()
    (project / "pyproject.toml").write_text(SUBDIRECTORY, encoding="utf-8")
    read = reading(read_project_files(project))
    missing = naming(read, read_version_file(tmp_path / "VERSION", "../VERSION"))
    assert missing.problem == (
        f"{project / '../VERSION'}: no such file: the prepare step's version-file is where the "
        "release's version is read from (write the version there, as the release workflow "
        "does from the tag)"
    )
    (project / "VERSION").write_text("\n", encoding="utf-8")
    empty = naming(read, read_version_file(project / "VERSION", "VERSION"))
    assert empty.problem is not None
    assert empty.problem.startswith(f"{project / 'VERSION'}:1: an empty file: ")
    (project / "VERSION").write_text("v1 beta\n", encoding="utf-8")
    bad = naming(read, read_version_file(project / "VERSION", "VERSION"))
    assert bad.problem == f"{project / 'VERSION'}:1: version 'v1 beta' is not PEP 440"
    assert missing.in_version_file
    assert empty.in_version_file
    assert bad.in_version_file


def test_a_literal_version_wins_over_a_version_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "tiny"\nversion = "2.0.0"\n', encoding="utf-8"
    )
    (tmp_path / "VERSION").write_text("9.9.9\n", encoding="utf-8")
    said = naming(
        reading(read_project_files(tmp_path)), read_version_file(tmp_path / "VERSION", "VERSION")
    )
    assert said.static is not None
    assert str(said.static[1]) == "2.0.0"
