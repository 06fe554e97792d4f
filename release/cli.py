"""The `release` command line: argument parsing only; each command lives in release.commands."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import cast

from release import __version__, proc
from release.commands.parsing.arguments import Command, add_command, parents
from release.console import Annotation, Output
from release.errors import ConfigError, FileError, ReleaseError

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
    parser = argparse.ArgumentParser(
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
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except ReleaseError as error:  # an output path the command could not write (options.py)
        _print_error(error)
        return error.exit_code
    proc.reset()
    environ = os.environ
    output = Output(environ, command=args.command)
    output.mask_secrets()
    _log_progress_to_stderr()
    try:
        with proc.interruptible():
            code: int = args.func(args)
    except ReleaseError as error:
        _print_error(error)
        for annotation in error_annotations(error, f"release {args.command}"):
            output.annotate(annotation)
        return error.exit_code
    except BrokenPipeError:
        # The reader went away (`release matrix | head`): stop quietly, as `yes | head` does.
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except OSError as error:
        failure = FileError.of(error)
        _print_error(failure)
        return failure.exit_code
    except KeyboardInterrupt:
        proc.stop_all()
        number = proc.last_signal()
        print(f"error: interrupted by {signal.Signals(number).name}", file=sys.stderr)
        return 128 + number
    return code


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
    """Log records as plain lines on whatever sys.stderr is when they come."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr, flush=True)
        except (OSError, ValueError):
            self.handleError(record)


def _log_progress_to_stderr() -> None:
    """The stages' progress lines (uploads, retries) as plain lines on stderr, once."""
    logger = logging.getLogger("release")
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        logger.addHandler(_Stderr())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _print_error(error: ReleaseError) -> None:
    try:
        for line in error.lines():
            print(line, file=sys.stderr)
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
