"""A prepare step's version-file as matrix.yaml's load reads it: what is wrong with it is
one problem at `build.prepare.version-file` (exit 2), and no build backend is asked of a
matrix already refused. The checkout is test_preparestep's (a dynamic version)."""

from __future__ import annotations

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
