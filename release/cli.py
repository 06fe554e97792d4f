"""The `release` command line: argument parsing only; each command lives in release.commands."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from release import __version__, proc
from release.commands import build as build_command
from release.commands import doctor as doctor_command
from release.commands import env as env_command
from release.commands import matrix as matrix_command
from release.commands import nccl as nccl_command
from release.commands import pins as pins_command
from release.commands import plan as plan_command
from release.commands import publish as publish_command
from release.commands import verify as verify_command
from release.errors import FileError, ReleaseError

COMMANDS = (
    matrix_command,
    nccl_command,
    doctor_command,
    build_command,
    publish_command,
    verify_command,
    plan_command,
    pins_command,
    env_command,
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--matrix",
        type=Path,
        default=Path("matrix.yaml"),
        metavar="PATH",
        help="the release matrix (default: ./matrix.yaml)",
    )
    parser = argparse.ArgumentParser(
        prog="release",
        description="Build, publish and verify the wheel matrix of a CUDA kernel project.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    proc.reset()
    try:
        with proc.interruptible():
            code: int = args.func(args)
    except ReleaseError as error:
        _print_error(error)
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
