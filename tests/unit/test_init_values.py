"""release.init.values through `release init --torch-index`: a URL is checked while the
command line is parsed, written exactly as given, and refused (exit 2, naming the option)
where it holds whitespace, a control character or a credential (issue 49: F2, F2b, F28).
init runs in-process (`release.cli.main`), --offline: no process, no socket.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from release.cli import main
from release.init.values import index_url_problem, workflow_text_problem

PYPROJECT = """\
[build-system]
requires = ["setuptools>=77", "torch>=2.10"]
build-backend = "setuptools.build_meta"
"""
SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="t-ops",
    version="0.1.0",
    ext_modules=[CUDAExtension("t_ops._C", ["csrc/ops.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "setup.py").write_text(SETUP)
    return tmp_path


def written_index(project: Path) -> object:
    matrix = YAML(typ="safe").load((project / "matrix.yaml").read_text(encoding="utf-8"))
    return matrix["cuda"]["13.0"]["torch-index"]


@pytest.mark.parametrize(
    "url",
    [
        "https://h.example/simple?x=1&y=2",
        "https://h.example/simple/?x=1&y=2#frag",
        "https://h.example/simple#x",
        "https://h.example/whl/cu129",
        "http://127.0.0.1:8080/a%20b/simple/",
        "https://h.example/simple/*&!{}[]",
    ],
)
def test_a_torch_index_is_written_exactly_as_given(
    project: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2: a query string is kept as is, no `/` is appended after it (or anywhere), nothing
    is cut at a `#`."""
    assert main(["init", str(project), "--offline", "--torch-index", url]) == 0
    assert written_index(project) == url
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://h.example/simple #x", "the URL holds whitespace"),
        ("https://h.example/simple\n k: v", "the URL holds whitespace"),
        ("https://h.example/sim\tple", "the URL holds whitespace"),
        ("https://h.example/sim\x1bple", "the URL holds the control character U+001B"),
        ("https://h.example/sim\u200eple", "the URL holds the control character U+200E"),
        ("ftp://h.example/simple/", "not an http(s) URL of a host"),
        ("https:///simple/", "not an http(s) URL of a host"),
        ("https://h.example:99999/simple/", "not a URL"),
        ("http://[::1/simple/", "not a URL"),
        ("https://u:Sekr3tPart#rest@h.example/simple/", "not a URL"),
    ],
)
def test_a_torch_index_that_is_no_url_is_refused_naming_the_option(
    project: Path, url: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F2b: whitespace, a newline, a tab, a control character: exit 2 naming --torch-index,
    nothing written."""
    assert main(["init", str(project), "--offline", "--torch-index", url]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"release init: error: argument --torch-index: {problem}")
    assert "Sekr3t" not in last  # urllib's reason named a password a # cut short, as a port
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml", "setup.py"]


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://u:SECRET-VALUE@h.example/simple/", "user:password@"),
        ("https://SECRET-VALUE@h.example/simple/", "user:password@"),
        ("https://h.example/simple?token=SECRET-VALUE", "'token'"),
        ("https://h.example/simple?x=1&access_token=SECRET-VALUE", "'access_token'"),
        ("https://h.example/simple?API-Key=SECRET-VALUE", "'API-Key'"),
        ("https://h.example/simple?sig=SECRET-VALUE&se=2030", "'sig'"),
        ("https://h.example/simple?X-Amz-Signature=SECRET-VALUE", "'X-Amz-Signature'"),
        ("https://h.example/simple?password=SECRET-VALUE", "'password'"),
        ("https://h.example/simple?auth=SECRET-VALUE", "'auth'"),
        ("https://h.example/simple?client_secret=SECRET-VALUE", "'client_secret'"),
    ],
)
def test_a_torch_index_with_a_credential_is_refused_and_the_environment_named(
    project: Path, url: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F28 (the refusal): matrix.yaml never holds a credential; the error says where it
    goes instead, and never shows it."""
    assert main(["init", str(project), "--offline", "--torch-index", url]) == 2
    err = capsys.readouterr().err
    assert "argument --torch-index:" in err
    assert named in err
    assert "put the credential in the environment (PIP_INDEX_URL / netrc)" in err
    assert "SECRET-VALUE" not in err
    assert not (project / "matrix.yaml").exists()


def test_the_checks_say_nothing_of_ordinary_values() -> None:
    assert index_url_problem("https://download.pytorch.org/whl/cu129") is None
    assert index_url_problem("https://h.example/simple?monkey=1") is not None  # cautious
    assert workflow_text_problem("kernels/é 日本 [x] {y} *z &a !b #c/matrix.yaml") is None
