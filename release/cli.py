"""The `release` command line: argument parsing only; each command lives in release.commands."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import cast

from release import __version__, proc
from release.commands.parsing.arguments import (
    Command,
    Parser,
    UsageError,
    add_command,
    json_file_problem,
    parents,
)
from release.commands.parsing.options import paths_unchecked
from release.console import Annotation, Failure, Output
from release.credentials import mask, secret_values
from release.errors import ConfigError, FileError, ReleaseError

# httpx imports its own command-line client (click, rich and pygments: some 55 ms of each
# command's start, a quarter of a short one's) wherever those three are installed; this
# program never runs it, and an import of a module set to None fails at once.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

# The commands in the order `release --help` lists them; `gpu-gate` is release.commands.gpu_gate.
COMMANDS: tuple[str, ...] = (
    "init",
    "matrix",
    "nccl",
    "doctor",
    "build",
    "publish",
    "verify",
    "audit",
    "plan",
    "pins",
    "gpu-gate",
    "env",
)
HELP_FLAGS = frozenset({"-h", "--help"})


def command_module(name: str) -> Command:
    """The module of the command `name`, imported now (and only now)."""
    return cast(Command, importlib.import_module(f"release.commands.{name.replace('-', '_')}"))


def needed_commands(argv: Sequence[str] | None) -> frozenset[str]:
    """The commands whose modules parsing `argv` needs: the one it names, every one for
    `release --help` (or when `argv` is None: a parser for any command line), none for
    `release --version` or a command line that names no command.

    A command imports only what it uses: the others' modules (publish's githubkit and
    sigstore, build's auditwheel) are never loaded for it.
    """
    if argv is None:
        return frozenset(COMMANDS)
    for arg in argv:
        if arg in HELP_FLAGS:
            return frozenset(COMMANDS)
        if not arg.startswith("-"):
            return frozenset({arg}) & frozenset(COMMANDS)
    return frozenset()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of `release`; with `argv`, one that parses that command line only (every
    command is a choice, but only the one `argv` names has its options)."""
    needed = needed_commands(argv)
    shared = parents()
    parser = Parser(
        prog="release",
        description="Build, publish and verify the wheel matrix of a CUDA kernel project.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if name in needed:
            add_command(subparsers, command_module(name), shared)
        else:
            subparsers.add_parser(name)  # a choice only: this command line names another
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `release argv`; its exit code. Every way a command ends goes through here: what
    it printed is masked (release.console), an error is one line and a hint on stderr, and
    with --json (or --json-file) one document comes out, failures included."""
    argv = sys.argv[1:] if argv is None else list(argv)
    environ = os.environ
    try:
        args = build_parser(argv).parse_args(argv)
    except UsageError as error:
        return _refused(argv, error.lines(), Failure(message=error.message, hint=None, exit_code=2))
    except ReleaseError as error:  # an output path the command could not write (options.py)
        with paths_unchecked():  # an unknown option before it is the usage error to say
            try:
                build_parser(argv).parse_args(argv)
            except UsageError as usage:
                said = Failure(message=usage.message, hint=None, exit_code=2)
                return _refused(argv, usage.lines(), said)
        return _refused(argv, error.lines(), failure_of(error))
    if (overwrite := json_file_problem(args)) is not None:
        return _refused(argv, overwrite.lines(), failure_of(overwrite))
    output = Output(
        environ,
        json_mode=getattr(args, "json", False),  # every command takes the shared output options
        json_file=getattr(args, "json_file", None),
        command=args.command,
    )
    proc.reset()
    output.mask_secrets()
    _log_progress_to_stderr()
    code, failure = _run(args, output)
    if code == BROKEN_PIPE:
        return code  # stdout is gone: no document can reach it
    return _finish(output, code, failure)


BROKEN_PIPE = 128 + signal.SIGPIPE


def failure_of(error: ReleaseError) -> Failure:
    return Failure(message=error.message, hint=error.hint, exit_code=error.exit_code)


def _run(args: argparse.Namespace, output: Output) -> tuple[int, Failure | None]:
    """The command's exit code, and how it failed where it did (printed on stderr)."""
    try:
        with proc.interruptible():
            code: int = args.func(args, output)
    except ReleaseError as error:
        _print_error(error.lines(), output)
        for annotation in error_annotations(error, f"release {args.command}"):
            output.annotate(annotation)
        return error.exit_code, failure_of(error)
    except BrokenPipeError:
        # The reader went away (`release matrix | head`): stop quietly, as `yes | head` does.
        _silence_stdout()
        return BROKEN_PIPE, None
    except OSError as error:
        file_failure = FileError.of(error)
        _print_error(file_failure.lines(), output)
        return file_failure.exit_code, failure_of(file_failure)
    except KeyboardInterrupt:
        proc.stop_all()
        number = proc.last_signal()
        message = f"interrupted by {signal.Signals(number).name}"
        _print_error([f"error: {message}"], output)
        return 128 + number, Failure(message=message, hint=None, exit_code=128 + number)
    except Exception as error:  # a bug: its traceback, masked, and the document
        message = f"a bug in release {args.command}: {type(error).__name__}: {error}"
        trace = "".join(traceback.format_exception(error)).splitlines()
        _print_error([*trace, f"error: {message}", f"hint: {BUG_HINT}"], output)
        return 1, Failure(message=message, hint=BUG_HINT, exit_code=1)
    if code != 0:
        return code, Failure(message=f"release {args.command} failed", hint=None, exit_code=code)
    return 0, None


BUG_HINT = "this is release's bug, not yours: please report it with the traceback above"


def _finish(output: Output, code: int, failure: Failure | None) -> int:
    """Write the command's document; a --json-file that cannot be written is the command's
    failure (its document then goes to stdout alone)."""
    try:
        output.finish(failure)
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    except (OSError, ReleaseError) as error:
        problem = error if isinstance(error, ReleaseError) else FileError.of(error, "write")
        _print_error(problem.lines(), output)
        output.json_file = None
        output.finish(failure_of(problem))
        return problem.exit_code
    return code


def _refused(argv: Sequence[str], lines: Sequence[str], failure: Failure) -> int:
    """A command line refused before its command ran: the error, and its document where
    the line asks for JSON on stdout."""
    output = Output(os.environ, json_mode=asks_json(argv), command=named_command(argv))
    _print_error(lines, output)
    try:
        output.finish(failure)
    except BrokenPipeError:
        _silence_stdout()
    return failure.exit_code


def named_command(argv: Sequence[str]) -> str:
    """The command `argv` names, or "" (the first word is not one)."""
    words = [arg for arg in argv if not arg.startswith("-")]
    return words[0] if words and words[0] in COMMANDS else ""


def asks_json(argv: Sequence[str]) -> bool:
    """Whether `argv` asks for its document on stdout (`--json`, `matrix --format json`),
    read from the words alone, for a command line the parser refused."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    pairs = zip(words, [*words[1:], ""], strict=True)
    return "--json" in words or "--format=json" in words or ("--format", "json") in pairs


_POSITION = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.*)$")


def error_annotations(error: ReleaseError, title: str) -> list[Annotation]:
    """One annotation per located problem (file, line, column), else one for the error."""
    found = [
        Annotation(
            message=location.message,
            file=location.file,
            line=location.line,
            col=location.column,
            title=title,
        )
        for location in error.locations
    ]
    if not found and isinstance(error, ConfigError):
        for problem in error.problems:
            match = _POSITION.match(problem)
            if match:
                found.append(
                    Annotation(
                        message=problem,
                        file=match["file"],
                        line=int(match["line"]),
                        col=int(match["col"]),
                        title=title,
                    )
                )
    if not found:
        text = error.message + (f"\n{error.hint}" if error.hint else "")
        found.append(Annotation(message=text, title=title))
    return found


class _Stderr(logging.Handler):
    """Log records as plain lines on whatever sys.stderr is when they come, masked."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = mask(self.format(record), secret_values(os.environ))
            print(text, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            self.handleError(record)


def _log_progress_to_stderr() -> None:
    """The stages' progress lines (uploads, retries) as plain lines on stderr, once."""
    logger = logging.getLogger("release")
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        logger.addHandler(_Stderr())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _print_error(lines: Sequence[str], output: Output) -> None:
    try:
        for line in lines:
            print(output.shown(line), file=sys.stderr)
    except BrokenPipeError:
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def console_main() -> None:
    sys.exit(main(sys.argv[1:]))
