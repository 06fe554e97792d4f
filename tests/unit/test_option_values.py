"""An option's value as an error shows it: on one line, escaped, cut short where it is long,
and a --json-file that would replace the matrix the command reads is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from release.cli import main
from release.errors import ConfigError
from tests.unit.test_cli_failures import subcommands

REPO = Path(__file__).resolve().parents[2]
MATRIX = str(REPO / "matrix.yaml")
LONGEST_LINE = 600  # as tests/unit/test_input_bounds.py holds a matrix problem to


def errors(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> list[str]:
    assert main(argv) == code
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("value", ["12.9\n ", "12.9\r\n", "12\u20289"])
def test_an_option_value_with_a_line_break_is_shown_escaped_on_one_line(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    # `--cuda $'12.9\n'` split its error over three `error:` lines
    lines = errors(capsys, ["matrix", "--matrix", MATRIX, "--cuda", value])
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: --cuda {value!a}: no cell has CUDA")


def test_every_problem_of_a_config_error_is_one_line() -> None:
    error = ConfigError(["a\nb", "c\x1bd\re"])
    assert error.problems == ("a\\nb", "c\\x1bd\\re")
    assert error.lines() == ["error: a\\nb", "error: c\\x1bd\\re"]


@pytest.mark.parametrize(
    "argv",
    [
        ["matrix", "--matrix", MATRIX, "--cuda", "9" * 100_000],
        ["matrix", "--matrix", MATRIX, "--arch", "x86_64", "--cuda", "1" * 5_000],
        ["matrix", "--matrix", "m/" * 3_000],
        ["matrix", "--matrix", "m" * 100_000],
        ["matrix", "--matrix", MATRIX, "--json-file", "m/" * 3_000],  # was a traceback
    ],
)
def test_a_very_long_option_value_is_cut_short_when_shown(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # 5,000 to 100,000 characters were echoed in full, twice, in one error line
    lines = errors(capsys, argv, 8 if "--json-file" in argv else 2)
    assert lines
    for line in lines:
        assert len(line) < LONGEST_LINE, line[:300]


@pytest.mark.parametrize("spelled", ["matrix.yaml", "./matrix.yaml", "sub/../matrix.yaml"])
def test_a_json_file_that_is_the_matrix_is_refused_and_the_matrix_kept(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spelled: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the JSON document quietly replaced the matrix
    shutil.copy(MATRIX, tmp_path / "matrix.yaml")
    (tmp_path / "sub").mkdir()
    (tmp_path / "csrc").symlink_to(REPO / "csrc")
    monkeypatch.chdir(tmp_path)
    before = (tmp_path / "matrix.yaml").read_bytes()
    lines = errors(capsys, ["matrix", "--json-file", spelled])
    assert lines[0] == (
        f"error: --json-file {Path(spelled)}: is the matrix the command reads (--matrix), "
        "which the document would replace"
    )
    assert (tmp_path / "matrix.yaml").read_bytes() == before


def test_every_url_option_has_a_checked_type() -> None:
    """`publish --repository-url` took any text: one with white space reached the network
    step, and one whose password held a `#` showed the password as a port."""
    unchecked = [
        f"{command} {action.option_strings[0]}"
        for command, parser in subcommands().items()
        for action in parser._actions
        if action.option_strings
        and (action.metavar == "URL" or action.option_strings[0].endswith("-url"))
        and action.metavar != "NAME=URL"  # read by release.commands.parsing's overrides
        and action.type is None
    ]
    assert unchecked == []


SECRET = "pypi-AgEIcHlwaS5vcmc"


@pytest.mark.parametrize(
    "url",
    [
        f"http://__token__:{SECRET}#rest@127.0.0.1:9/",
        f"http://__token__:{SECRET}?rest@127.0.0.1:9/",
        "http://127.0.0.1:9/ x",
        "http://127.0.0.1:9/\nx",
    ],
)
@pytest.mark.parametrize("command", ["plan", "publish"])
def test_a_repository_url_that_cannot_be_read_is_refused_unshown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, url: str
) -> None:
    argv = [command, "--dist", str(tmp_path), "--repository-url", url, "--json"]
    assert main([*argv, *(["--matrix", MATRIX] if command == "plan" else ["--dry-run"])]) == 2
    out, err = capsys.readouterr()
    assert "--repository-url" in err
    assert SECRET[5:] not in out + err
