"""A prepare step's version-file as matrix.yaml's load reads it: what is wrong with it is
one problem at `build.prepare.version-file` (exit 2), and no build backend is asked of a
matrix already refused. The checkout is test_preparestep's (a dynamic version)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError
from release.matrix import Matrix, load_matrix
from release.project import Naming
from tests.unit.test_preparestep import checkout


def refused(matrix: Path, asked: list[str] | None = None) -> list[str]:
    def metadata(provisional: Matrix, said: Naming) -> tuple[str, Version]:
        assert asked is not None
        asked.append(str(provisional.path))
        raise AssertionError("the build backend was asked")

    with pytest.raises(ConfigError) as error:
        load_matrix(matrix, metadata if asked is not None else None)
    assert error.value.exit_code == 2
    return list(error.value.problems)


def test_a_linked_version_file_is_the_problem_and_the_backend_is_not_asked(
    tmp_path: Path,
) -> None:
    matrix = checkout(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-VERSION"
    outside.write_text("9.9.9\n")
    (tmp_path / "sub" / "VERSION").unlink()
    (tmp_path / "sub" / "VERSION").symlink_to(outside)
    asked: list[str] = []
    problems = refused(matrix, asked)
    assert asked == []
    assert problems == [
        "matrix.yaml:3:60: build.prepare.version-file: is reached through the symbolic link "
        "sub/VERSION, and release reads and writes the version there: name a file of the "
        "checkout itself"
    ]


def test_a_version_file_that_is_not_a_regular_file_is_a_problem_at_its_key(
    tmp_path: Path,
) -> None:
    matrix = checkout(tmp_path)
    version = tmp_path / "sub" / "VERSION"
    version.unlink()
    version.mkdir()
    (problem,) = refused(matrix, [])
    assert problem == (
        f"matrix.yaml:3:60: build.prepare.version-file: {version}: not a regular file: the "
        "prepare step's version-file is where the release's version is read from (write the "
        "version there, as the release workflow does from the tag)"
    )
    version.rmdir()
    os.mkfifo(version)
    (problem,) = refused(matrix, [])
    assert f"build.prepare.version-file: {version}: not a regular file: " in problem


def test_a_version_file_that_is_not_utf8_says_so_not_empty(tmp_path: Path) -> None:
    matrix = checkout(tmp_path)
    (tmp_path / "sub" / "VERSION").write_bytes(b"1.0\xff\n")
    (problem,) = refused(matrix, [])
    assert problem.startswith(
        f"matrix.yaml:3:60: build.prepare.version-file: {tmp_path / 'sub' / 'VERSION'}: not "
        "UTF-8 (byte 0xff at line 1, column 4): "
    )


def test_a_version_with_a_local_label_is_refused_naming_the_public_one(tmp_path: Path) -> None:
    """`1.0+cu130` was the release's version in its header, and `1.0` every cell's."""
    matrix = checkout(tmp_path)
    (tmp_path / "sub" / "VERSION").write_text("1.0+cu130\n")
    (problem,) = refused(matrix, [])
    assert problem == (
        f"matrix.yaml:3:60: build.prepare.version-file: {tmp_path / 'sub' / 'VERSION'}:1: "
        "version '1.0+cu130' has a local label (+cu130), which matrix.yaml gives each copy "
        "(`local-label:`): write 1.0"
    )


@pytest.mark.parametrize(
    ("named", "what"),
    [
        ("matrix.yaml", "matrix.yaml itself"),
        ("./matrix.yaml", "matrix.yaml itself"),
        ("sub/pyproject.toml", "the project's pyproject.toml"),
        ("sub/setup.py", "the project's setup.py"),
    ],
)
def test_a_version_file_release_reads_its_configuration_from_is_refused(
    tmp_path: Path, named: str, what: str
) -> None:
    # the version was written over matrix.yaml before each build
    matrix = checkout(tmp_path)
    matrix.write_text(
        matrix.read_text().replace("version-file: sub/VERSION", f"version-file: {named}")
    )
    before = matrix.read_text()
    problems = refused(matrix)
    assert problems == [
        f"matrix.yaml:3:60: build.prepare.version-file: is {what}, which release reads, and "
        "writing the version would replace it: name the file the command reads the version from"
    ]
    assert matrix.read_text() == before
