"""The `release` command line: argument parsing only; each command lives in release.commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from release import __version__
from release.commands import build as build_command
from release.commands import doctor as doctor_command
from release.commands import env as env_command
from release.commands import matrix as matrix_command
from release.commands import nccl as nccl_command
from release.commands import plan as plan_command
from release.commands import publish as publish_command
from release.commands import verify as verify_command
from release.errors import ReleaseError

COMMANDS = (
    matrix_command,
    nccl_command,
    doctor_command,
    build_command,
    publish_command,
    verify_command,
    plan_command,
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
    try:
        code: int = args.func(args)
    except ReleaseError as error:
        for line in error.lines():
            print(line, file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return code


def console_main() -> None:
    sys.exit(main(sys.argv[1:]))
