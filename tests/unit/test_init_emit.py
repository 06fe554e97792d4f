"""release.init.emit: what `release init` writes is emitted by ruamel.yaml, never pasted into
text. Whatever a directory's name or a setup.py's switch holds, init either refuses it (exit
2, naming what) or writes files that read back as exactly the values meant, with no text of
the user's inside a `${{ }}` of the workflow (issue 49: F1, F2b, F3). init runs in-process
(`release.cli.main`), --offline: no process, no socket.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from release.cli import main
from release.init.emit import ABSENT, comment_safe, emit, wrapped
from release.init.render import render_workflow

# Every expression the written workflow holds: the tool's own, none of the user's text.
TOOL_EXPRESSIONS = {
    "${{ github.workflow }}",
    "${{ github.ref }}",
    "${{ steps.publish.outputs.index }}",
    "${{ needs.publish.outputs.index == 'true' }}",
}
CMAKE_PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "k"
version = "0.1.0"
"""
CMAKELISTS = "cmake_minimum_required(VERSION 3.26)\nproject(k LANGUAGES CXX CUDA)\n"
TORCH_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77", "torch>=2.10"]
build-backend = "setuptools.build_meta"
"""
TORCH_SETUP = """\
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

cuda = torch.cuda.is_available() or os.environ.get({name!r}) == {value!r}
extension = CUDAExtension if cuda else CppExtension
setup(
    name="t-ops",
    version="0.1.0",
    ext_modules=[extension("t_ops._C", ["csrc/ops.cu"])],
    cmdclass={{"build_ext": BuildExtension}},
)
"""
# Characters YAML, GitHub Actions or a shell read as something: the generator is biased
# toward these, and toward what a workflow must not carry (REFUSED).
METACHARACTERS = [
    "${", "$", " }}", "}}", ":", ": ", " #", "#", "{", "}", "[", "]", "*", "&", "!", "- ", "-",
    "?", "|", ">", "%", "@", "`", "'", '"', ",", "\\", "~", " ", "é", "日本", "\U0001f600",
    "\u00a0", "null", "true", "0x1f", "...", "---",
]  # fmt: skip
REFUSED = [
    "${{ ", "${{", "\n", "\r", "\t", "\x85", "\u2028", "\u2029", "\ufeff", "\x1b", "\x7f",
    "\udcff",
]  # fmt: skip
# a Linux file name: any character but "/" and NUL (a byte that is not UTF-8 is a surrogate)
NAME_CHARACTERS = st.characters(
    blacklist_characters="/\x00", blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp")
)
FRAGMENTS = st.one_of(
    st.sampled_from(METACHARACTERS),
    st.text(NAME_CHARACTERS, min_size=1, max_size=3),
    st.sampled_from(METACHARACTERS),
    st.text(NAME_CHARACTERS, min_size=1, max_size=3),
    st.sampled_from(REFUSED),
)
NAMES = (
    st.lists(FRAGMENTS, min_size=1, max_size=6)
    .map("".join)
    .filter(lambda n: n not in (".", "..") and len(n.encode("utf-8", "surrogateescape")) <= 255)
)


def rt_load(text: str) -> Any:
    return YAML(typ="rt").load(text)


def must_refuse(name: str) -> bool:
    """What a workflow must not carry: an expression, a line break, a control or format
    character, a byte that is not UTF-8."""
    return "${{" in name or any(
        unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in name
    )


def strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (*strings(k), *strings(v))]
    if isinstance(node, list):
        return [s for item in node for s in strings(item)]
    return [node] if isinstance(node, str) else []


def cmake_project(where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text(CMAKE_PYPROJECT)
    (where / "CMakeLists.txt").write_text(CMAKELISTS)
    return where


@settings(
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(name=NAMES)
def test_any_directory_name_is_refused_or_written_so_it_reads_back_exactly(
    name: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """F1: a directory named `${{ github.event.head_commit.message }}`, `x: y`, `a #b`,
    `{a}`, `- d`, a backtick, a newline, ...: init refuses it (exit 2, one line, nothing
    written) or writes a workflow whose `matrix:` reads back as exactly that path and whose
    only expressions are the tool's."""
    root = tmp_path_factory.mktemp("repo")
    (root / ".git").mkdir()  # the repository's root: the workflow names the matrix from here
    project = cmake_project(root / name)
    capsys.readouterr()
    code = main(["init", str(project)])
    err = capsys.readouterr().err
    workflow = root / ".github" / "workflows" / "release.yml"
    if must_refuse(name):
        event("refused")
        assert code == 2, err
        assert [line.split(":")[0] for line in err.splitlines()] == ["error", "hint"]
        assert not workflow.exists()
        assert not (project / "matrix.yaml").exists()
        return
    event("written")
    assert code == 0, err
    text = workflow.read_text(encoding="utf-8")
    document = rt_load(text)
    jobs = document["jobs"]
    assert jobs["build"]["with"]["matrix"] == f"{name}/matrix.yaml"
    assert jobs["verify"]["with"]["matrix"] == f"{name}/matrix.yaml"
    found = {e for s in strings(document) for e in re.findall(r"\$\{\{.*?\}\}", s)}
    assert found == TOOL_EXPRESSIONS
    assert set(re.findall(r"\$\{\{.*?\}\}", text)) <= TOOL_EXPRESSIONS | {
        "${{ secrets.NAME }}"  # the comment that says how to pass a token
    }
    assert rt_load((project / "matrix.yaml").read_text(encoding="utf-8"))["project"] == "."


def torch_project(where: Path, name: str, value: str) -> Path:
    where.mkdir()
    (where / "pyproject.toml").write_text(TORCH_PYPROJECT)
    (where / "setup.py").write_text(TORCH_SETUP.format(name=name, value=value))
    return where


@pytest.mark.parametrize(
    "value", ["${HOME}", "$HOME", "$$", 'a"b', "a'b", "x: y", "a #b", "\\n", "\t1"]
)
def test_a_switch_value_is_written_as_the_project_says_it(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F3: a force-CUDA value `"${HOME}"` is build.env's `${HOME}`, not `$${HOME}`; F2b: a
    value with `"` is carried, not "this is release init's bug"."""
    project = torch_project(tmp_path / "t", "FORCE_CUDA", value)
    assert main(["init", str(project), "--offline"]) == 0, capsys.readouterr().err
    matrix = rt_load((project / "matrix.yaml").read_text(encoding="utf-8"))
    assert matrix["build"]["env"] == {"FORCE_CUDA": value}


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("FORCE CUDA", "1", "'FORCE CUDA' is not an environment variable name"),
        ("MY_TOKEN", "1", "MY_TOKEN looks like a credential"),
        ("FORCE_CUDA", "a\0b", "it holds a NUL character"),
        ("FORCE_CUDA", "\t1\u2028", "it holds the control character \\u2028"),
    ],
)
def test_a_switch_build_env_cannot_carry_is_refused_at_its_line(
    tmp_path: Path, name: str, value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2b: a switch the matrix could not hold is refused naming setup.py's line, never
    "this is release init's bug"; nothing is written."""
    project = torch_project(tmp_path / "t", name, value)
    assert main(["init", str(project), "--offline"]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    assert error.startswith(f"error: setup.py:7: the switch {name!r}=")
    assert problem in error
    assert "bug" not in error + hint
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml", "setup.py"]


def test_a_comment_quoting_the_project_holds_all_of_it_on_its_lines() -> None:
    """A note's text with line breaks of every kind stays in its comment: the file reads as
    the same data with or without it."""
    hostile = "a\nkey: 1\rb: 2\x85c: 3\u2028d: 4\u2029e: 5\x0bf: 6\x1bg"
    assert not {"\n", "\r"} & set(comment_safe(hostile))
    text = emit("release.yml", _workflow_values(), {**_workflow_comments(), "matrix": hostile})
    assert rt_load(text) == rt_load(render_workflow("0.4.2", "m.yaml", "f" * 40))
    assert "# Release: builds every cell of a\\nkey: 1\\rb: 2\\x85c: 3\\u2028d" in text
    assert wrapped("x\ny", "  # ") == "  # x\n  # y"


def _workflow_values() -> dict[str, Any]:
    document = rt_load(render_workflow("0.4.2", "m.yaml", "f" * 40))
    jobs = document["jobs"]
    return {
        "build_uses": jobs["build"]["uses"],
        "publish_uses": jobs["publish"]["steps"][0]["uses"],
        "verify_uses": jobs["verify"]["uses"],
        "matrix": "m.yaml",
        "tool_version": jobs["build"]["with"]["tool-version"],
        "publish_with": ABSENT,
        "reader_token_secret": ABSENT,
        "reader_secrets": ABSENT,
    }


def _workflow_comments() -> dict[str, str]:
    return {"docs_url": "d", "tool_version": "0.4.2", "publisher": "p", "pin_note": ""}


@pytest.mark.parametrize("path", ["a\x85b/matrix.yaml", "\u2028 x/matrix.yaml", "é\xa0/m.yaml"])
def test_the_emitter_carries_even_what_init_refuses_for_a_workflow(path: str) -> None:
    """Beneath the refusals: a value with a NEL or a line separator (which ruamel.yaml's
    plain and single-quoted styles fold) is written in double quotes and reads back as
    itself."""
    document = rt_load(render_workflow("0.4.2", path, "f" * 40))
    assert document["jobs"]["build"]["with"]["matrix"] == path


LIMITED_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

FLOOR = "cp3" + "10"
setup(
    name="t-ops",
    version="0.1.0",
    ext_modules=[
        CUDAExtension(
            "t_ops._C",
            ["csrc/ops.cu"],
            py_limited_api=True,
            extra_compile_args={"cxx": ["-DPy_LIMITED_API=0x0A0B0000"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": FLOOR}},
)
"""


def test_a_project_value_the_matrix_refuses_is_named_by_its_line_not_called_a_bug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2b's class: whatever value of the project the loader refuses (here an abi3 floor of
    10.11 from a -DPy_LIMITED_API define) is said with the setup.py line init read it at,
    never "this is release init's bug"; nothing is written."""
    (tmp_path / "pyproject.toml").write_text(TORCH_PYPROJECT)
    (tmp_path / "setup.py").write_text(LIMITED_SETUP)
    assert main(["init", str(tmp_path), "--offline"]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    assert error.startswith(
        "error: setup.py:13: -DPy_LIMITED_API=0x0A0B0000: matrix.yaml cannot take abi3 10.11: "
    )
    assert "bug" not in hint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "setup.py"]
