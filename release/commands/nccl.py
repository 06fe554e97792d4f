"""`release nccl`: the NCCL override (uv) and constraints (pip) files per CUDA major."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from release import http
from release.console import make_console, table
from release.errors import ConfigError
from release.matrix import load_matrix
from release.nccl import (
    DEFAULT_INDEX_URL,
    check_pins_exist,
    override_files,
    require_pins,
    write_override_files,
)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "nccl",
        parents=[common],
        help="write the NCCL override files for each CUDA major",
        description=(
            "Write cuNN.txt (for uv's UV_OVERRIDE) and cuNN-constraints.txt (for pip -c) "
            "for every CUDA major that pins NCCL in the matrix."
        ),
    )
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output directory")
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument(
        "--check",
        action="store_true",
        help="ask the package index that each pinned version exists before writing",
    )
    parser.add_argument("--index-url", default=DEFAULT_INDEX_URL, help="index for --check")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    pins = matrix.nccl_pins(matrix.select(cuda=args.cuda))
    require_pins(pins)
    if args.check:
        with http.client() as client:
            problems = check_pins_exist(pins, index_url=args.index_url, client=client)
        if problems:
            raise ConfigError(problems, hint="fix the nccl pins in the matrix; nothing written")
    files = override_files(pins)
    written = write_override_files(files, args.out)
    rows = [
        [f"{f.cuda_major}.x", f.requirement, f.purpose, str(p)]
        for f, p in zip(files, written, strict=True)
    ]
    make_console().print(table(["CUDA", "requirement", "for", "file"], rows))
    return 0
