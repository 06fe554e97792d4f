"""release.writing through `release init`: both files are staged, and moved in place only
when both are written; where the workflow's directory cannot be made or written, nothing of
the user's is written or replaced, `--force` or not (issue 49: F21). init runs in-process
(`release.cli.main`): no process, no socket.
"""

from __future__ import annotations

import array
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from release.cli import main

PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "k"
version = "0.1.0"
"""
CMAKELISTS = "cmake_minimum_required(VERSION 3.26)\nproject(k LANGUAGES CXX CUDA)\n"
MINE = b"# the user's own matrix\nproject: .\n"
# linux/fs.h: what `chattr +i` sets, the one thing that keeps root out of a directory
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL = 0x80086601, 0x40086602, 0x10


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


@contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """`directory` read-only; as root (whom permissions do not stop) immutable too."""
    directory.chmod(0o555)
    flags = None
    try:
        if os.geteuid() == 0:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                got = array.array("i", [0])
                fcntl.ioctl(fd, FS_IOC_GETFLAGS, got, True)
                fcntl.ioctl(fd, FS_IOC_SETFLAGS, array.array("i", [got[0] | FS_IMMUTABLE_FL]))
                flags = got[0]
            except OSError as error:
                pytest.skip(f"root, and this file system keeps no immutable flag: {error}")
            finally:
                os.close(fd)
        yield
    finally:
        if flags is not None:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.ioctl(fd, FS_IOC_SETFLAGS, array.array("i", [flags]))
            finally:
                os.close(fd)
        directory.chmod(0o755)


def file_where_github_goes(project: Path) -> None:
    (project / ".github").write_text("a file\n")


def file_where_workflows_goes(project: Path) -> None:
    (project / ".github").mkdir()
    (project / ".github" / "workflows").write_text("a file\n")


@pytest.mark.parametrize(
    ("blocked", "force", "in_the_way"),
    [
        (file_where_github_goes, False, ".github"),
        (file_where_workflows_goes, False, ".github/workflows"),
        (file_where_workflows_goes, True, ".github/workflows"),
    ],
    ids=["file-at-.github", "file-at-workflows", "force-over-matrix-with-file-at-workflows"],
)
def test_a_workflow_that_cannot_be_written_leaves_everything_as_it_was(
    tmp_path: Path,
    blocked: Callable[[Path], None],
    force: bool,
    in_the_way: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """F21: exit 8, one line naming the path in the way; the user's matrix.yaml (with
    --force: the one it would replace) is byte for byte what it was, nothing staged is left."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    blocked(tmp_path)
    if force:
        (tmp_path / "matrix.yaml").write_bytes(MINE)
    before = tree(tmp_path)
    assert main(["init", str(tmp_path), *(["--force"] if force else [])]) == 8
    error, hint = capsys.readouterr().err.splitlines()
    assert error == (
        f"error: cannot create the directory {tmp_path / in_the_way}: a file is in the way"
    )
    assert hint.startswith("hint: nothing was written")
    assert tree(tmp_path) == before


def test_a_read_only_github_directory_leaves_everything_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F21: `.github` exists and cannot be written: exit 8 naming the directory init could
    not make, and neither file is written."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    (tmp_path / ".github").mkdir()
    before = tree(tmp_path)
    with unwritable(tmp_path / ".github"):
        code = main(["init", str(tmp_path)])
    assert code == 8
    error, _ = capsys.readouterr().err.splitlines()
    assert error.startswith(f"error: cannot write {tmp_path / '.github' / 'workflows'}: ")
    assert tree(tmp_path) == before


def test_with_force_both_files_are_replaced_together(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    (tmp_path / "matrix.yaml").write_bytes(MINE)
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "release.yml").write_text("# mine\n")
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "matrix.yaml").read_bytes().startswith(b"# yaml-language-server:")
    workflow = tmp_path / ".github" / "workflows" / "release.yml"
    assert workflow.read_text().startswith("# Release: builds every cell of matrix.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".github", "CMakeLists.txt", "matrix.yaml", "pyproject.toml",
    ]  # fmt: skip
