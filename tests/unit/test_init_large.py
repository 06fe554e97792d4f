"""`release init` on build files that repeat themselves or hold much (probe P6-I6, I7, I8): each
file is parsed once, a finding repeated at many lines is one note that says how many, and a
matrix that would still be too large names the project file that fills it. In-process,
--offline: no process, no socket."""

from __future__ import annotations

import ast
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import release.project.files
import release.project.pyproject
import release.project.pysource
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


def test_init_parses_setup_py_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its three readers (settings, native sources, the local-version switch) each parsed
    it, where one tree serves them all (docs/init.md said it was parsed once)."""
    parsed: list[int] = []
    parse = ast.parse

    def counted(source: str | bytes, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str) and "setup(" in source:
            parsed.append(len(source))
        return parse(source, *args, **kwargs)

    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "torch_ops", project)
    monkeypatch.setattr(ast, "parse", counted)
    release.project.pysource._parsed.cache_clear()  # another test's setup.py may be kept
    assert main(["init", str(project), "--offline"]) == 0, capsys.readouterr()
    assert len(parsed) == 1


def test_a_change_repeated_at_many_lines_is_one_note_saying_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """P6-I7: each of 6,000 `set(CMAKE_CUDA_ARCHITECTURES 80)` was a change of its own, and a
    matrix.yaml past the loader's 1 MiB ("this is release init's bug", exit 2)."""
    project = cmake_project(tmp_path, "set(CMAKE_CUDA_ARCHITECTURES 80)\n" * 6000)
    assert main(["init", str(project), "--offline", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert len(changes) == 1
    first = int(changes[0]["place"].rpartition(":")[2])
    assert changes[0]["text"].endswith(
        f"(6,000 places: lines {', '.join(str(first + n) for n in range(5))} and 5,995 more)"
    )
    assert len((project / "matrix.yaml").read_bytes()) < 8192


def test_a_matrix_too_large_for_its_loader_names_the_project_file_that_fills_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """P6-I7: a computed version of a megabyte, which matrix.yaml quotes as undecided, said
    "this is release init's bug"."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools", "torch"]\n'
        '[project]\nname = "k-ops"\ndynamic = ["version"]\n'
    )
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CUDAExtension\n"
        f"setup(version=v('{'a' * 1_100_000}'), ext_modules=[CUDAExtension('k', ['k.cu'])])\n"
    )
    assert main(["init", str(tmp_path), "--offline"]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    assert error.startswith(
        f"error: {tmp_path / 'setup.py'}:2: what release init read there would make matrix.yaml 1,0"
    )
    assert error.endswith("KiB, past the 1,024 KiB a matrix may be (a matrix is a few KB)")
    assert "bug" not in hint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "setup.py"]
