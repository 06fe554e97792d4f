"""How the command line ends when the input or the surroundings are wrong: one line, the
right exit code, no traceback, nothing half-written, no credential echoed, and with --json
one document that says so."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from release.cli import build_parser, main
from release.commands.parsing.options import (
    ExistingDir,
    OutputDir,
    OutputFile,
    Seconds,
    WholeNumber,
    github_api_url,
)
from release.console import Failure, Output
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
    # the document is written last; the report went to stderr before, as --json puts it
    code = main(["matrix", "--matrix", MATRIX, "--format", "json"])
    assert code == 141
    err = capsys.readouterr().err
    assert "k3-kernels" in err
    assert "error" not in err
    assert "Traceback" not in err


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
        assert main([command, option, value, *required(command)]) == 2
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
    assert err[0] == f"error: cannot write {out / 'cu12.txt'}: it is not a regular file"
    assert sorted(p.name for p in out.iterdir()) == ["cu12.txt"]  # all or nothing: no other


def in_a_missing_directory(tmp: Path) -> Path:
    return tmp / "missing" / "dir" / "report.json"


@pytest.mark.parametrize(("command", "action"), cases(OutputFile))
def test_an_output_file_in_a_directory_that_does_not_exist_is_refused_naming_it(
    command: str, action: argparse.Action, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F29: the help of --json-file, --markdown and env --out says the directory must exist:
    it is checked while the line is parsed, and nothing is created."""
    option = action.option_strings[0]
    path = in_a_missing_directory(tmp_path)
    code, err = fails_cleanly([command, option, str(path), *required(command)], tmp_path, capsys)
    assert code == 8
    assert err[0] == f"error: {option} {path}: its directory {path.parent} does not exist"


def test_init_with_a_json_file_in_a_missing_directory_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F29: `release init --json-file /missing/dir/x.json` wrote matrix.yaml and the workflow
    and exited 0 with no document anywhere."""
    shutil.copytree(REPO / "csrc", tmp_path / "project", ignore=shutil.ignore_patterns("build*"))
    (tmp_path / "project" / "matrix.yaml").unlink(missing_ok=True)
    path = in_a_missing_directory(tmp_path)
    code, err = fails_cleanly(
        ["init", str(tmp_path / "project"), "--json-file", str(path)], tmp_path, capsys
    )
    assert code == 8
    assert err[0].startswith(f"error: --json-file {path}: ")


# --- --json keeps its promise (F25): one document on every exit of every command. ---


def json_commands() -> list[str]:
    return [
        command
        for command, parser in subcommands().items()
        if any("--json" in action.option_strings for action in parser._actions)
    ]


def failing_line(command: str, tmp: Path) -> list[str]:
    """A command line of `command` that fails once the command runs: the files it reads
    are missing (or, for a project directory, empty)."""
    line = [command, *required(command)]
    for action in subcommands()[command]._actions:
        if "--matrix" in action.option_strings:
            line += ["--matrix", str(tmp / "missing" / "matrix.yaml")]
        elif "--dist" in action.option_strings:
            line += ["--dist", str(tmp / "missing" / "dist")]
        elif not action.option_strings and isinstance(action.type, ExistingDir):
            (tmp / "empty").mkdir()
            line.insert(1, str(tmp / "empty"))
    return line


def one_failure_document(out: str, err: str, command: str, code: int) -> dict[str, Any]:
    """stdout's one document (a second would not parse), checked against the exit code and
    the error stderr shows."""
    document: dict[str, Any] = json.loads(out)
    assert document["schema"] == 1
    assert document["command"] == command
    assert document["ok"] is False
    assert document["error"]["exit_code"] == code
    first = document["error"]["message"].splitlines()[0]
    assert any(line.endswith(f"error: {first}") for line in err.splitlines()), err
    return document


@pytest.mark.parametrize("command", json_commands())
def test_a_command_that_fails_prints_one_json_document(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F25: 140 of 203 failing --json runs printed nothing on stdout."""
    report = tmp_path / "report.json"
    code = main([*failing_line(command, tmp_path), "--json", "--json-file", str(report)])
    out, err = capsys.readouterr()
    assert code not in (0, 1), err  # a user's error, not a bug
    assert "Traceback" not in err
    document = one_failure_document(out, err, command, code)
    assert json.loads(report.read_text()) == document


@pytest.mark.parametrize("command", json_commands())
def test_a_command_line_argparse_refuses_prints_one_json_document(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([command, *required(command), "--json", "--no-such-option"])
    out, err = capsys.readouterr()
    assert code == 2
    document = one_failure_document(out, err, command, code)
    assert document["error"]["message"].startswith("unrecognized arguments: ")


def test_a_bug_is_a_traceback_and_still_one_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that breaks (here a stand-in `run` raising, as a bug would) shows its
    traceback on stderr and exits 1; --json still gets its document."""

    def broken(args: argparse.Namespace, out: Output) -> int:
        raise RuntimeError(f"index out of range at https://u:{SECRET}@h/")

    monkeypatch.setattr("release.commands.nccl.run", broken)
    code = main(["nccl", "--matrix", MATRIX, "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback (most recent call last):" in err
    document = one_failure_document(out, err, "nccl", code)
    assert "RuntimeError: index out of range" in document["error"]["message"]
    assert SECRET not in out + err


def test_a_document_the_command_made_before_failing_carries_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    output = Output({}, json_mode=True, command="build", stdout=out)
    output.document({"ok": False, "cells": []})
    output.finish(Failure(message="1 of 4 cells failed", hint="see the log", exit_code=4))
    assert json.loads(out.getvalue()) == {
        "schema": 1, "command": "build", "ok": False, "cells": [],
        "error": {"message": "1 of 4 cells failed", "hint": "see the log", "exit_code": 4},
    }  # fmt: skip


# --- No secret given on the command line or in the environment is echoed (F27). ---

SECRET = "S3cr3t-Val-0042"
LONG_SECRET = "L0ngS3cr3t" * 6
ECHOED = {
    "compile-cache": ["build", "--compile-cache", f"redis://:{SECRET}@h"],
    "compile-cache-s3": [
        "build", "--compile-cache", f"s3://bucket/p?endpoint=http://u:{SECRET}@minio&region=r"
    ],
    "compile-cache-cut": [
        "build", "--compile-cache", f"s3://bucket/p?endpoint=http://u:{LONG_SECRET}@minio"
    ],
    "github-api-url-verify": ["verify", "--github-api-url", f"https://u:{SECRET}@ghe.example/"],
    "github-api-url-plan": ["plan", "--github-api-url", f"https://{SECRET}@ghe.example/api/v3"],
    "github-api-url-query": ["publish", "--github-api-url", f"https://h/?token={SECRET}"],
    "index-url-unknown": ["build", "--index-url", f"pypi=http://u:{SECRET}@h/simple/"],
    "index-url-not-http": ["verify", "--index-url", f"pypi=ftp://u:{SECRET}@h/simple/"],
    "choice": ["build", "--arch", f"http://u:{SECRET}@h/"],
    "number": ["verify", "--timeout", f"https://h/?sig={SECRET}"],
}  # fmt: skip


def pieces(secret: str) -> list[str]:
    """Every 8 characters of `secret`: a cut message may show part of one."""
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


@pytest.mark.parametrize("name", ECHOED)
def test_no_option_echoes_a_credential(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no matrix.yaml, no dist/: nothing for a command to reach
    argv = [*ECHOED[name], "--matrix", MATRIX, "--json", "--json-file", str(tmp_path / "d.json")]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    written = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    secret = LONG_SECRET if LONG_SECRET in " ".join(argv) else SECRET
    for piece in pieces(secret):
        assert piece not in out + err + written
    assert "***" in out
    assert "***" in err


def test_no_variable_s_value_is_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # no git log asked
    monkeypatch.setenv("RELEASE_COMPILE_CACHE", f"s3://bucket/p?endpoint=http://u:{SECRET}@h")
    assert main(["build", "--matrix", MATRIX, "--dry-run", "--json"]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "RELEASE_COMPILE_CACHE" in err


# --- GitHub repositories and API URLs, from options and the environment (F12, F13, F15). ---


def api_url_options() -> list[Any]:
    return [
        pytest.param(command, action, id=f"{command} {action.option_strings[0]}")
        for command, parser in subcommands().items()
        for action in parser._actions
        if action.type is github_api_url
    ]


def test_every_github_api_url_option_is_checked() -> None:
    assert {p.values[0] for p in api_url_options()} >= {"plan", "publish", "verify"}


@pytest.mark.parametrize(("command", "action"), api_url_options())
@pytest.mark.parametrize("value", ["::::", "https://::::", "https://h:x/"])
def test_a_github_api_url_that_is_not_one_is_a_usage_error(
    command: str, action: argparse.Action, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F15: `--github-api-url '::::'` ended in httpx's InvalidURL traceback."""
    assert main([command, action.option_strings[0], value, *required(command)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(
        f"release {command}: error: argument --github-api-url: {value!r} is not a GitHub API "
        "base URL ("
    )


@pytest.mark.parametrize("value", ["a", "a/..", "a/.", "../x", "a/b/c"])
def test_a_provenance_repository_that_is_not_one_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F13: `--provenance-repository a/..` was taken, and the request went to
    /repos/attestations/..."""
    assert main(["verify", "--provenance-repository", value]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(
        f"release verify: error: argument --provenance-repository: {value!r} is not OWNER/REPO ("
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [("GITHUB_REPOSITORY", "a"), ("GITHUB_REPOSITORY", "o/r\n"), ("GITHUB_REPOSITORY", "a/.."),
     ("GITHUB_API_URL", "::::"), ("GITHUB_API_URL", "https://api.github.com\n")],
)  # fmt: skip
def test_a_github_variable_that_is_not_one_is_a_configuration_error_naming_it(
    variable: str,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """F12: GITHUB_REPOSITORY=a (verify's default for --provenance-repository) ended in a
    traceback; checked as the option it stands in for, before anything is read."""
    monkeypatch.setenv(variable, value)
    code = main(["verify", "--dist", str(tmp_path / "dist"), "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines()[0].startswith(f"error: {variable}={value!r} is not ")
    assert json.loads(out)["error"]["exit_code"] == 2


@pytest.mark.parametrize(
    ("value", "said"),
    [("notaurl", "is not an http(s) URL"), ("ftp://h/simple/", "is not an http(s) URL"),
     ("http://[::1", "is not a URL: its host or port cannot be read"),
     (f"https://u:{SECRET}@h:x/", "is not a URL: its host or port cannot be read"),
     ("https://h/simple/\nx", "holds white space or a control character"),
     ("http:///simple/", "names no host"),
     ("https://h:0/simple/", "names port 0, where no server listens")],
)  # fmt: skip
def test_an_index_nccl_asks_that_is_no_url_is_a_usage_error(
    value: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nccl --check --index-url notaurl` was asked of the network and ended in exit 5,
    "check the network"; a private index's credentials stay allowed, and hidden."""
    out = tmp_path / "out"
    assert main(["nccl", "--check", "--index-url", value, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("release nccl: error: argument --index-url: ")
    assert err.splitlines()[-1].endswith(said)
    assert SECRET not in err
    assert not out.exists()


# --- Files written for users never hold a credential: it is refused where it comes in. ---


@pytest.mark.parametrize(
    "url", [f"https://{SECRET}@pages.example/", f"https://pages.example/?token={SECRET}"]
)
def test_an_index_base_url_with_credentials_is_refused(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index's pages and published.json keep their URLs usable, so they cannot hold
    them masked: an --index-base-url with credentials is refused before anything is read
    or written."""
    argv = ["publish", "--dry-run", "--index-base-url", url, "--dist", str(tmp_path / "dist")]
    code, err = fails_cleanly(argv, tmp_path, capsys)
    assert code == 2
    assert "holds credentials" in "\n".join(err)
    assert SECRET not in "\n".join(err)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("WHL_KEY", "WHL_KEY does not say it holds a secret"),
        ("GITHUB_PAT", "GITHUB_PAT: GitHub refuses secret names that start with GITHUB_"),
        ("9_TOKEN", "'9_TOKEN' is not an environment variable's name"),
    ],
)
def test_init_takes_a_destination_token_secret_matrix_yaml_would_take(
    name: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--destination-token-secret", name, "--offline"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(
        f"release init: error: argument --destination-token-secret: {said}"
    )
    args = build_parser().parse_args(["init", "--destination-token-secret", "GH_PAT_FOR_WHL"])
    assert args.destination_token_secret == "GH_PAT_FOR_WHL"


@pytest.mark.parametrize(
    "line",
    [
        ["init", "--matrix", "/no/such/dir"],  # the value taken as init's DIR
        ["init", "/no/such/dir", "--bogus"],
        ["nccl", "--out", "/dev/null/x", "--bogus"],
    ],
)
def test_an_unknown_option_is_said_before_a_path_it_made_wrong(
    line: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped option whose value argparse then takes as a path: the option is the
    error, not the path."""
    code = main([*line, "--json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    document = one_failure_document(out, err, line[0], code)
    assert document["error"]["message"].startswith("unrecognized arguments: "), err
    assert "no such directory" not in err
    assert "not a directory" not in err


def test_an_audit_option_naming_no_program_or_no_project_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--cuobjdump /nonexistent` gave every wheel with device code a finding ("cuobjdump
    cannot read it"), exit 7, and `--project ''` asked for the root's own URL plus `/`."""
    page = "http://127.0.0.1:9/simple/"
    for option, value in (("--cuobjdump", "/nonexistent/cuobjdump"), ("--cuobjdump", str(tmp_path)),
                          ("--cuobjdump", "no-such-program-here"), ("--project", "")):  # fmt: skip
        code = main(["audit", page, option, value])
        err = capsys.readouterr().err
        assert code == 2, err
        (line,) = [one for one in err.splitlines() if one.startswith("error:")]
        assert line.startswith(f"error: {option} ")
