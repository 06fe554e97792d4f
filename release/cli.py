"""The `release` command line: argument parsing only; each command lives in release.commands."""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence

from release import __version__, proc
from release.commands import build as build_command
from release.commands import doctor as doctor_command
from release.commands import env as env_command
from release.commands import gpu_gate as gpu_gate_command
from release.commands import matrix as matrix_command
from release.commands import nccl as nccl_command
from release.commands import pins as pins_command
from release.commands import plan as plan_command
from release.commands import publish as publish_command
from release.commands import verify as verify_command
from release.commands.common import Command, add_command, parents
from release.console import Annotation, Output
from release.errors import ConfigError, FileError, ReleaseError

COMMANDS: tuple[Command, ...] = (
    matrix_command,
    nccl_command,
    doctor_command,
    build_command,
    publish_command,
    verify_command,
    plan_command,
    pins_command,
    gpu_gate_command,
    env_command,
)


def build_parser() -> argparse.ArgumentParser:
    shared = parents()
    parser = argparse.ArgumentParser(
        prog="release",
        description="Build, publish and verify the wheel matrix of a CUDA kernel project.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        add_command(subparsers, command, shared)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
