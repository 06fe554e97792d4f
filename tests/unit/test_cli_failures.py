"""How the command line ends when the input or the surroundings are wrong: one line, the
right exit code, no traceback, nothing half-written."""

from __future__ import annotations

import argparse
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from release.cli import build_parser, main
from release.commands.parsing.options import OutputDir, OutputFile, Seconds, WholeNumber
from release.errors import FileError
from release.fsutil import write_atomic

REPO = Path(__file__).resolve().parents[2]
MATRIX = str(REPO / "matrix.yaml")


class ClosedPipe(io.StringIO):
    """stdout after the reader went away (`release matrix | head`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")


def test_a_closed_pipe_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["matrix", "--matrix", MATRIX, "--format", "json"])
    assert code == 141
    assert capsys.readouterr().err == ""


def test_a_bad_source_date_epoch_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "last tuesday")
    code = main(["build", "--matrix", MATRIX, "--dry-run"])
    assert code == 2
    assert "SOURCE_DATE_EPOCH='last tuesday' is not a whole number" in capsys.readouterr().err


# --- Every numeric option and every output path, found in the parser itself. ---

# Path options the commands only read; a new Path option must be added here or typed as
# an OutputFile / OutputDir, so that no output path escapes the tests below.
INPUT_PATHS = {
    "--matrix",
    "--dist",
    "--compare",
    "--record",
    "--cuda-home",
    "--pages-repo",
    "--previous-manifest",
    "--urls",  # audit: a list of wheel URLs it reads
    "--cuobjdump",  # audit: the program that lists device code
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (choices,) = [
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    return dict(choices)


def options(kind: type[Any] | tuple[type[Any], ...]) -> Iterator[tuple[str, argparse.Action]]:
    for command, parser in subcommands().items():
        for action in parser._actions:
            if isinstance(action.type, kind):
                yield command, action


def cases(kind: type[Any] | tuple[type[Any], ...]) -> list[Any]:
    return [
        pytest.param(command, action, id=f"{command} {action.option_strings[0]}")
        for command, action in options(kind)
    ]


def required(command: str) -> list[str]:
    """The command's required options, with a value each (the first choice where any)."""
    out: list[str] = []
    for action in subcommands()[command]._actions:
        if action.required and action.option_strings:
            out += [action.option_strings[0], str(next(iter(action.choices or ["x"])))]
    return out


def test_every_numeric_and_path_option_has_a_checked_type() -> None:
    untyped = []
    for command, parser in subcommands().items():
        for action in parser._actions:
            option = action.option_strings[0] if action.option_strings else action.dest
            if action.type in (int, float) or (action.type is Path and option not in INPUT_PATHS):
                untyped.append(f"{command} {option}")
    assert untyped == []
    numeric = {a.option_strings[0] for _, a in options((WholeNumber, Seconds))}
    paths = {a.option_strings[0] for _, a in options((OutputFile, OutputDir))}
    assert {"--timeout", "--attempts", "--concurrency", "--latest", "--jobs"} <= numeric
    assert {"--json-file", "--markdown", "--out", "--index-dir", "--cache-dir"} <= paths


def refused_numbers(kind: WholeNumber | Seconds) -> list[str]:
    if isinstance(kind, Seconds):
        return ["0", "-1", "nan", "inf", "1e999", f"{kind.most * 2:g}", "soon", ""]
    return [str(kind.least - 1), str(kind.most + 1), "-1", "two", "1.5", ""]


@pytest.mark.parametrize(("command", "action"), cases((WholeNumber, Seconds)))
def test_a_number_out_of_range_is_a_usage_error_naming_the_option(
    command: str, action: argparse.Action, capsys: pytest.CaptureFixture[str]
) -> None:
    option = action.option_strings[0]
    kind = action.type
    assert isinstance(kind, (WholeNumber, Seconds))
    assert action.help is not None
    assert kind.accepted in action.help  # --help says the range
    for value in refused_numbers(kind):
        with pytest.raises(SystemExit) as exited:
            main([command, option, value, *required(command)])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.splitlines()[-1] == (
            f"release {command}: error: argument {option}: {failure_text(kind, value)}"
        )
    least = kind.least if isinstance(kind, WholeNumber) else kind.most / 1e6
    for accepted in (least, kind.most):
        args = build_parser().parse_args([command, option, str(accepted), *required(command)])
        assert getattr(args, action.dest) == accepted


def failure_text(kind: WholeNumber | Seconds, value: str) -> str:
    if isinstance(kind, Seconds):
        return f"must be a positive number of seconds, at most {kind.most:g}, got {value}"
    return f"must be a whole number from {kind.least} to {kind.most}, got {value}"


def everything_under(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


def a_directory(tmp: Path) -> Path:
    (tmp / "taken").mkdir()
    return tmp / "taken"


def below_a_file(tmp: Path) -> Path:
    (tmp / "file").write_text("a file")
    return tmp / "file" / "out"


def a_fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")
    return tmp / "fifo"


def a_file(tmp: Path) -> Path:
    (tmp / "file").write_text("a file")
    return tmp / "file"


def fails_cleanly(
    argv: list[str], tmp: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    """Run `release argv`; the exit code and stderr's lines, having checked that nothing
    under `tmp` changed and no traceback was printed."""
    before = everything_under(tmp)
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert everything_under(tmp) == before  # no stray .tmp file, nothing replaced
    return code, err.splitlines()


@pytest.mark.parametrize("hostile", [a_directory, below_a_file, a_fifo], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("command", "action"), cases(OutputFile))
def test_an_output_file_that_cannot_be_written_is_one_line_with_exit_code_8(
    command: str,
    action: argparse.Action,
    hostile: Callable[[Path], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    option = action.option_strings[0]
    path = hostile(tmp_path)
    code, err = fails_cleanly([command, option, str(path), *required(command)], tmp_path, capsys)
    assert code == 8
    assert err[0].startswith(f"error: {option} {path}: ")
    assert ".tmp" not in err[0]


@pytest.mark.parametrize("hostile", [a_file, below_a_file], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("command", "action"), cases(OutputDir))
def test_an_output_directory_that_cannot_be_made_is_one_line_with_exit_code_8(
    command: str,
    action: argparse.Action,
    hostile: Callable[[Path], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    option = action.option_strings[0]
    path = hostile(tmp_path)
    code, err = fails_cleanly([command, option, str(path), *required(command)], tmp_path, capsys)
    assert code == 8
    expected = "is a file, not a directory" if path.is_file() else "is not a directory"
    assert err[0].startswith(f"error: {option} {path}: ")
    assert err[0].endswith(expected)


@pytest.mark.parametrize("hostile", [a_directory, below_a_file, a_fifo], ids=lambda f: f.__name__)
def test_the_writer_names_the_path_it_was_given_and_leaves_nothing(
    hostile: Callable[[Path], Path], tmp_path: Path
) -> None:
    path = hostile(tmp_path)
    before = everything_under(tmp_path)
    with pytest.raises((OSError, FileError)) as caught:
        write_atomic(path, b"data")
    if isinstance(caught.value, OSError):
        assert caught.value.filename == str(path)
    else:
        assert isinstance(caught.value, FileError)
        assert caught.value.message.startswith(f"{path}: ")
    assert everything_under(tmp_path) == before


def test_a_file_the_writer_cannot_replace_names_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nccl"
    (out / "cu12.txt").mkdir(parents=True)  # passes --out's check; fails the write
    code, err = fails_cleanly(["nccl", "--matrix", MATRIX, "--out", str(out)], tmp_path, capsys)
    assert code == 8
    assert err[0] == f"error: {out / 'cu12.txt'}: Is a directory"
