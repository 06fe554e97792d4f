"""`release init` on build files that repeat themselves or hold much (probe P6-I6, I7, I8): each
file is parsed once, a finding repeated at many lines is one note that says how many, and a
matrix that would still be too large names the project file that fills it. In-process,
--offline: no process, no socket."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

import release.project.files
import release.project.pyproject
from release.cli import main
from release.fsutil import toml_document
from release.project.cmakelists import CMakeLists, read_cmakelists

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def cmake_project(tmp_path: Path, extra: str = "") -> Path:
    project = tmp_path / "proj"
    shutil.copytree(
        FIXTURES / "cmake_kernels", project, ignore=shutil.ignore_patterns("matrix.yaml", "tests")
    )
    with (project / "CMakeLists.txt").open("a") as stream:
        stream.write(extra)
    return project


def test_init_parses_each_build_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """P6-I8, I6: the files were read, then read again by the layout and the decision: a
    25 MB pyproject.toml took three to four times tomllib's own parse, a CMakeLists.txt of
    800,000 lines was read three times."""
    parsed: Counter[str] = Counter()

    def toml(data: bytes | str, where: str) -> dict[str, object]:
        parsed[where] += 1
        return toml_document(data, where)

    def cmake(text: str, file: str = "CMakeLists.txt") -> CMakeLists:
        parsed[file] += 1
        return read_cmakelists(text, file)

    monkeypatch.setattr(release.project.pyproject, "toml_document", toml)
    monkeypatch.setattr(release.project.files, "read_cmakelists", cmake)
    assert main(["init", str(cmake_project(tmp_path)), "--offline"]) == 0, capsys.readouterr()
    assert parsed == {"pyproject.toml": 1, "CMakeLists.txt": 1}
