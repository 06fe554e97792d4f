"""release.project.pysource: a setup.py is decoded as Python decodes it (PEP 263), refused
by file and line where it does not decode, and read in time linear in its size (issue 49:
F22, F23). `release init` runs in-process (`release.cli.main`), --offline: no process, no
socket.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.project.pysource import (
    MAX_PYTHON_TOKENS,
    SourceIndex,
    decode_python,
    token_count,
)
from release.project.setuppy import read_setup_py

PYPROJECT = """\
[build-system]
requires = ["setuptools>=77", "torch>=2.10"]
build-backend = "setuptools.build_meta"
"""
LATIN1_SETUP = """\
# -*- coding: latin-1 -*-
# Opérateurs CUDA de l'équipe (this file is latin-1, as its first line says)
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="t-ops",
    version="0.1.0",
    description="Opérateurs",
    ext_modules=[CUDAExtension("t_ops._C", ["csrc/ops.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""
# One step of a generated setup.py: a class of its own (whose base init reads) and a helper
# with a docstring, a comment, a dict of compile arguments and an environment switch.
STEP = '''\
class Step{i}(object):
    """Step {i} of the build: each generated step is a class of its own, with a docstring
    that says what it does, as generated build helpers often have."""


def helper_{i}(sources, flags):
    """Collect the sources and flags step {i} of the CUDA extension needs, in order, and
    return them with the extra compile arguments of this step; nvcc reads its flags left
    to right, so the order of the list is kept as the step gives it."""
    # nvcc reads its flags left to right: keep their order
    extra = {{"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]}}
    if os.environ.get("STEP_{i}_DEBUG") == "1":
        extra["nvcc"].append("-G")
    return sources + ["csrc/kernel_{i}.cu"], flags + extra["nvcc"]


'''
BIG_HEAD = """\
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

"""
BIG_TAIL = """\
setup(
    name="big-ops",
    version="1.0.0",
    ext_modules=[CUDAExtension("big_ops._C", ["csrc/ops.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""


def big_setup_py(size: int) -> str:
    """A setup.py of at least `size` bytes of code: many classes and functions, then setup()
    (benchmarks/init_large.py measures init on it)."""
    parts = [BIG_HEAD]
    length = len(BIG_HEAD)
    step = 0
    while length < size:
        parts.append(STEP.format(i=step))
        length += len(parts[-1])
        step += 1
    parts.append(BIG_TAIL)
    return "".join(parts)


def init_json(project: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code = main(["init", str(project), "--offline", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    document: dict[str, object] = json.loads(out)
    return document


def test_a_latin_1_setup_py_with_its_coding_declaration_is_read_as_python_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F23: a PEP 263 latin-1 setup.py is not read as empty ("no build system")."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "setup.py").write_bytes(LATIN1_SETUP.encode("latin-1"))
    document = init_json(tmp_path, capsys)
    assert document["backend"] == "torch"
    detected = {f["key"]: f["value"] for f in document["detected"]}  # type: ignore[attr-defined]
    assert (detected["name"], detected["version"]) == ("t-ops", "0.1.0")


@pytest.mark.parametrize(
    ("data", "line", "said"),
    [
        (b"from setuptools import setup\n# caf\xe9\nsetup()\n", 2, "byte 0xe9 is not utf-8"),
        (b"# -*- coding: ascii -*-\nx = 1\ny = '\xff'\n", 3, "byte 0xff is not ascii"),
        (b"# -*- coding: no-such-codec -*-\nx = 1\n", None, "unknown encoding: no-such-codec"),
    ],
)
def test_a_setup_py_that_does_not_decode_is_refused_naming_the_file_and_line(
    tmp_path: Path,
    data: bytes,
    line: int | None,
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """F23: undecodable bytes are one line naming setup.py (and the line), not "no build
    system"; nothing is written."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "setup.py").write_bytes(data)
    assert main(["init", str(tmp_path), "--offline"]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    where = f"{tmp_path / 'setup.py'}" + (f":{line}" if line else "")
    assert error.startswith(f"error: {where}: {said}")
    assert hint.startswith("hint: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "setup.py"]


def test_decoding_keeps_what_python_keeps() -> None:
    assert decode_python(b"\xef\xbb\xbfx = 1\r\ny = 2\r", "s.py") == "x = 1\ny = 2\n"
    assert decode_python("# coding: cp1252\nx = '€'\n".encode("cp1252"), "s.py").endswith("'€'\n")


def test_a_node_s_source_is_what_ast_says_it_is() -> None:
    text = 'x = {"a": [1,\n  2]}  # é\ndef f(\n    a, b):\n    return a  + b\ns = "\\u00e9" + "ü"\n'
    tree = ast.parse(text)
    index = SourceIndex(tree, text)
    for node in ast.walk(tree):
        assert index.segment(node) == ast.get_source_segment(text, node)


@pytest.mark.timeout(120)  # the quadratic read took 136 s for 0.5 MB; the linear one 3 s for 2 MB
def test_init_reads_a_big_setup_py_in_linear_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F22: 1 MB of code (about 750 classes and as many functions) is read in time linear
    in its size: before, each class cost a split of the whole file (0.5 MB took 136 s,
    1 MB would take some 9 minutes: the timeout fails it). The fast tier's size;
    benchmarks/init_large.py prints the times of 5, 10 and 25 MB side by side."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "setup.py").write_text(big_setup_py(1_000_000))
    document = init_json(tmp_path, capsys)
    detected = {f["key"]: f["value"] for f in document["detected"]}  # type: ignore[attr-defined]
    assert (document["backend"], detected["name"]) == ("torch", "big-ops")


def test_a_setup_py_of_more_tokens_than_the_bound_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """P6-I5: a one-line list of numbers costs Python's parser about 600 bytes a token (25 MB
    of `1,` took 14 GB and 180 s): past MAX_PYTHON_TOKENS it is refused by name and why, exit
    2, and never handed to ast.parse."""
    parsed: list[str] = []
    real_parse = ast.parse

    def parse(text: str, *args: Any, **kwargs: Any) -> Any:  # pytest parses too
        parsed.append(text[:20])
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    listed = "1," * (MAX_PYTHON_TOKENS // 2)
    (tmp_path / "setup.py").write_text(f"from setuptools import setup\nX = [{listed}]\nsetup()\n")
    code = main(["init", str(tmp_path), "--offline"])
    monkeypatch.undo()
    assert code == 2
    error = capsys.readouterr().err.splitlines()[0]
    assert error.startswith(f"error: {tmp_path / 'setup.py'}: too large to parse: about 4,000,")
    assert parsed == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "setup.py"]


def test_ordinary_code_of_25_mb_is_within_the_token_bound() -> None:
    """The benchmark's 25 MB setup.py (benchmarks/init_large.py) is read: at a twenty-fifth
    of its size, at least 40% below the bound."""
    assert token_count(big_setup_py(1_000_000)) * 25 < MAX_PYTHON_TOKENS * 0.6


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ('x = """\n' + '\\"""' * 50_000, 3),  # unclosed: to the end, never backtracked over
        ("s = '''" + "'" * 5 + "'''\n# a, b, c\n", 4),
        ('f"{a}{b}" "c" # x\n', 6),  # each `{` of an f-string once more
        ("not not 1or 2", 5),
    ],
)
def test_tokens_are_counted_in_one_pass(text: str, count: int) -> None:
    assert token_count(text) == count


@pytest.mark.parametrize(
    "expression", ["-" * 100_000 + "1", "not " * 50_000 + "1", "lambda: " * 50_000 + "1"]
)
def test_an_expression_past_the_parsers_limits_is_said_in_words(expression: str) -> None:
    """P6-I9: CPython's parser raises MemoryError('') on these: "not Python: " said nothing."""
    assert read_setup_py(f"x = 1\nx = {expression}\n").problem == (
        "setup.py: not Python as Python's parser reads it: an expression nested too deep for it "
        "(operators, brackets, `not` or `lambda` chained past its limits)"
    )
    nested = read_setup_py(f"x = 1\nx = {'(' * 300}1{')' * 300}\n").problem
    assert nested == "setup.py:2: not Python: too many nested parentheses"
