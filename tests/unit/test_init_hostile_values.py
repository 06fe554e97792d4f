"""`release init` on hostile values (probe 6: P6-I1, I3, I4, I10, I11, I12, I13): a
force switch's value is written only where init works its condition out to true with it;
every value it writes is held to the matrix loader's rules where it is read, and an error
names the setup.py line or the option, never "release init's bug"; a --torch-index the
redactor would change is refused; a link where a file goes is a file; --json holds no lone
surrogate; an invalid requires-python is an error at its line; the "next:" command reads
back as the path. init runs in-process (`release.cli.main`), --offline: no process, no
socket.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from release.cli import main
from release.fsutil import json_document

PYPROJECT = """\
[build-system]
requires = ["setuptools>=77", "torch>=2.10"]
build-backend = "setuptools.build_meta"

[project]
name = "t-ops"
version = "0.1.0"
requires-python = ">=3.10"
"""
# flash-attention's shape: bdist_wheel.run() downloads a prebuilt wheel unless CONDITION
PREBUILT = """\
import os
import urllib.request
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

FORCE_BUILD = CONDITION


class CachedWheelsCommand(bdist_wheel):
    def run(self):
        if FORCE_BUILD:
            return super().run()
        urllib.request.urlretrieve("https://h.example/x.whl", "x.whl")


setup(
    ext_modules=[CUDAExtension("t_ops._C", ["csrc/ops.cu"])],
    cmdclass={"bdist_wheel": CachedWheelsCommand, "build_ext": BuildExtension},
)
"""
FORCE_CUDA = """\
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

if torch.cuda.is_available() or CONDITION:
    ext = CUDAExtension("t_ops._C", ["csrc/ops.cu"])
else:
    ext = CppExtension("t_ops._C", ["csrc/ops.cpp"])
setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtension})
"""
X = "K3_FORCE_BUILD"


def project(where: Path, setup: str, pyproject: str = PYPROJECT) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "pyproject.toml").write_text(pyproject)
    (where / "setup.py").write_text(setup, encoding="utf-8")
    return where


def init_json(directory: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["init", str(directory), "--offline", "--json", *args]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def build_env(directory: Path) -> dict[str, str]:
    matrix = YAML(typ="safe").load((directory / "matrix.yaml").read_text(encoding="utf-8"))
    env: dict[str, str] = matrix.get("build", {}).get("env", {})
    return env


def line_of(path: Path, text: str) -> int:
    (number,) = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return number


# - P6-I3: a switch's value is one its condition works out to true with -


@pytest.mark.parametrize(
    ("condition", "value"),
    [
        (f'os.getenv("{X}", "FALSE") == "TRUE"', "TRUE"),
        (f'os.environ.get("{X}") == "TRUE"', "TRUE"),
        (f'os.getenv("{X}", "0") in ("1", "true")', "1"),
        (f'os.getenv("{X}", "x").lower() == "true"', "true"),
        (f'int(os.getenv("{X}", "0")) == 2', "2"),
        (f'os.getenv("{X}", "FALSE") == "TRUE ".strip()', "TRUE"),
        (f'os.getenv("{X}", "FALSE") == ""', None),
        (f'not os.getenv("{X}")', None),
        (f'os.getenv("{X}", "x").upper() == "true"', None),
        (f'os.getenv("{X}", "0") == 1', None),
        (f'os.getenv("{X}", "0") == b"TRUE"', None),
        (f'os.getenv("{X}", "0") == f"TRUE"', None),
        (f'"{X}" in os.environ', "1"),  # any value: it said no variable skips the download
    ],
)
def test_a_force_build_switch_gets_a_value_its_condition_is_true_with_or_is_undecided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], condition: str, value: str | None
) -> None:
    """P6-I3: `== ""`, `not`, `.upper() == "true"`, `== 1`, `== b"TRUE"` wrote X: "1" (or
    "true"), which leaves the download on; now such a switch is not decided, at its line."""
    directory = project(tmp_path / "p", PREBUILT.replace("CONDITION", condition))
    document = init_json(directory, capsys)
    if value is not None:
        assert build_env(directory) == {X: value}
        return
    assert X not in build_env(directory)
    line = line_of(directory / "setup.py", "FORCE_BUILD = ")
    notes = [n for n in document["undecided"] if X in n["text"]]  # type: ignore[attr-defined]
    assert [n["place"] for n in notes] == [f"setup.py:{line}"]


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "PYTHONPATH", "HOME"])
def test_a_switch_on_a_variable_the_build_itself_depends_on_is_not_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """P6-I3: `os.getenv("PATH", "FALSE") == "TRUE"` wrote PATH: "TRUE" into build.env."""
    condition = f'os.getenv("{name}", "FALSE") == "TRUE"'
    directory = project(tmp_path / "p", PREBUILT.replace("CONDITION", condition))
    document = init_json(directory, capsys)
    assert name not in build_env(directory)
    (note,) = [n for n in document["undecided"] if name in n["text"]]  # type: ignore[attr-defined]
    assert note["place"] == f"setup.py:{line_of(directory / 'setup.py', 'FORCE_BUILD = ')}"


def test_a_force_cuda_switch_of_no_provable_value_is_undecided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    condition = 'os.getenv("FORCE_CUDA", "0") == 1'
    directory = project(tmp_path / "p", FORCE_CUDA.replace("CONDITION", condition))
    document = init_json(directory, capsys)
    assert "FORCE_CUDA" not in build_env(directory)
    line = line_of(directory / "setup.py", "is_available")
    notes = [n for n in document["undecided"] if "FORCE_CUDA" in n["text"]]  # type: ignore[attr-defined]
    assert [n["place"] for n in notes] == [f"setup.py:{line}"]


# - P6-I4: each value is held to the loader's rules where it is read -


@pytest.mark.parametrize("literal", ['"' + "a" * 5000 + '"', '"on\\ud800"'])
def test_a_switch_value_the_loader_refuses_is_an_error_at_its_setup_py_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], literal: str
) -> None:
    """P6-I4: a value over 4096 characters or with a lone surrogate was "the matrix for DIR
    does not load: matrix.yaml:22:34", with the hint that this is release init's bug."""
    condition = f'os.getenv("{X}", "FALSE") == {literal}'
    directory = project(tmp_path / "p", PREBUILT.replace("CONDITION", condition))
    assert main(["init", str(directory), "--offline"]) == 2
    err = capsys.readouterr().err
    line = line_of(directory / "setup.py", "FORCE_BUILD = ")
    assert err.startswith(f"error: setup.py:{line}: ")
    assert "release init's bug" not in err
    assert len(err.splitlines()) == 2
    assert not (directory / "matrix.yaml").exists()


def test_a_switch_value_with_line_breaks_is_written_exactly_and_said_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A force-build value of `x` and two lines that read as YAML was said over three lines
    in init's report, and the comment above it in matrix.yaml lost its source ("From .")."""
    value = "x\nbuild:\n  evil: 1"
    condition = f'os.getenv("{X}", "FALSE") == {value!r}'
    directory = project(tmp_path / "p", PREBUILT.replace("CONDITION", condition))
    assert main(["init", str(directory), "--offline"]) == 0
    report = capsys.readouterr().out
    assert build_env(directory) == {X: value}
    assert f"value: {X}='x\\nbuild:\\n  evil: 1'" in report.splitlines()
    matrix = (directory / "matrix.yaml").read_text(encoding="utf-8").splitlines()
    at = matrix.index(f'    {X}: "x\\nbuild:\\n  evil: 1"')
    comment: list[str] = []
    while matrix[at - 1 - len(comment)].startswith("    # "):
        comment.insert(0, matrix[at - 1 - len(comment)].removeprefix("    # "))
    assert " ".join(comment).startswith(
        f"From setup.py:{line_of(directory / 'setup.py', 'urlretrieve')}"
    )
    assert "'x\\nbuild:\\n  evil: 1'" in " ".join(comment)
    assert "From ." not in "\n".join(matrix)


@pytest.mark.parametrize(
    "url",
    [
        "HTTP://h.example/simple/",
        "Http://h.example/simple/",
        "https://h.example/simple/" + "a" * 5000,
        # P6-I1: what the redactor would mask, wherever it stands
        "https://h.example/simple/#token=SECRET-VALUE",
        "https://h.example/simple/;token=SECRET-VALUE",
        "https://h.example/simple/?x=1;token=SECRET-VALUE",
        "https://h.example/simple/?code=SECRET-VALUE",
    ],
)
def test_a_torch_index_the_matrix_could_not_hold_is_refused_at_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    """P6-I4: an upper-case scheme or a URL over 4096 characters was found only when the
    rendered matrix was loaded ("release init's bug"); P6-I1: `#token=`, `;token=` and
    `?code=` were written as `***`, neither refused nor written as given."""
    directory = project(tmp_path / "p", FORCE_CUDA.replace("CONDITION", "False"))
    assert main(["init", str(directory), "--offline", "--torch-index", url]) == 2
    err = capsys.readouterr().err
    assert "argument --torch-index: " in err.splitlines()[-1]
    assert "SECRET-VALUE" not in err
    assert "release init's bug" not in err
    assert not (directory / "matrix.yaml").exists()


# - P6-I10: a link is an existing entry -


@pytest.mark.parametrize("which", ["matrix.yaml", ".github/workflows/release.yml"])
def test_a_link_where_a_file_goes_is_not_written_over_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    """P6-I10: a dangling matrix.yaml link was replaced by a file, exit 0."""
    directory = project(tmp_path / "p", FORCE_CUDA.replace("CONDITION", "False"))
    (directory / ".git").mkdir()
    link = directory / which
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(tmp_path / "nowhere")
    assert main(["init", str(directory), "--offline"]) == 8
    assert "already exists" in capsys.readouterr().err
    assert link.is_symlink()
    assert not (tmp_path / "nowhere").exists()


# - P6-I11: --json holds text, never a lone surrogate -


def test_a_path_that_is_not_utf8_is_escaped_in_the_json_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P6-I11: "directory" held `\\udcff`, which strict JSON readers (release's own) refuse.
    The streams are a process's in a UTF-8 locale: stdout strict, stderr backslashreplace."""
    bad = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xffroot"))
    directory = project(bad / "p", FORCE_CUDA.replace("CONDITION", "False"))
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(
        sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    )
    assert main(["init", str(directory), "--offline", "--json"]) == 0
    stdout.flush()
    text = stdout.buffer.getvalue().decode()
    document = json_document(text.encode(), "stdout")
    assert isinstance(document, dict)
    assert document["directory"].endswith("/bad\\udcffroot/p")


# - P6-I12: requires-python is a specifier or an error at its line -


@pytest.mark.parametrize("value", ["${{ github.token }}", "x\\ny: 1", "\\u2028>=3.10", ">=3.x"])
def test_an_invalid_requires_python_is_an_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """P6-I12: it was ignored (the abi3 floor taken from torch instead), exit 0."""
    pyproject = PYPROJECT.replace('">=3.10"', f'"{value}"')
    directory = project(tmp_path / "p", FORCE_CUDA.replace("CONDITION", "False"), pyproject)
    assert main(["init", str(directory), "--offline"]) == 2
    err = capsys.readouterr().err.splitlines()
    line = line_of(directory / "pyproject.toml", "requires-python")
    assert err[0].startswith(f"error: {directory / 'pyproject.toml'}:{line}: requires-python ")
    assert not (directory / "matrix.yaml").exists()


# - P6-I13: the command printed for copying reads back as the path -


@pytest.mark.parametrize("name", ['it\'s "q"', "--force", "a b", "- ", "| x", "$(id)"])
def test_the_next_command_quotes_the_matrix_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """P6-I13: `release build --dry-run --matrix --force/matrix.yaml` was printed."""
    directory = project(tmp_path / name, FORCE_CUDA.replace("CONDITION", "False"))
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--offline", "--", name]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("next:")]
    command = shlex.split(line.split("`")[1])
    assert command[:4] == ["release", "build", "--dry-run", "--matrix"]
    (path,) = command[4:]
    assert not path.startswith("-")
    assert (tmp_path / path).resolve() == (directory / "matrix.yaml").resolve()
