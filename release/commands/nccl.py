"""Write cuNN.txt (uv: UV_OVERRIDE or --override), cuNN-reinstall.txt (pip: a second `pip install
--no-deps --force-reinstall -r` step) and cuNN-constraints.txt (pip -c, which only narrows) for
every CUDA major that pins NCCL in the matrix.

`release nccl`: the NCCL override (uv) and constraints (pip) files per CUDA major.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from release.commands.parsing import arguments, common, options
from release.console import Output
from release.defaults import PYPI_SIMPLE
from release.errors import ConfigError

HELP = "write the NCCL pin files for each CUDA major"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_output_dir(
        parser, "--out", "output directory (default: dist)", default=Path("dist")
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument(
        "--check",
        action="store_true",
        help="ask the package index that each pinned version exists before writing",
    )
    parser.add_argument(
        "--index-url", default=PYPI_SIMPLE, type=options.asked_url, help="index for --check"
    )


def run(args: argparse.Namespace, out: Output) -> int:
    from release.downstream.nccl import (
        check_pins_exist,
        override_files,
        require_pins,
        write_override_files,
    )
    from release.remote import httpclient as http

    matrix = common.load(args.matrix, out)
    pins = matrix.nccl_pins(matrix.select(cuda=args.cuda))
    require_pins(pins)
    if args.check:
        with http.client() as client:
            problems = check_pins_exist(pins, index_url=args.index_url, client=client)
        if problems:
            raise ConfigError(problems, hint="fix the nccl pins in the matrix; nothing written")
    files = override_files(pins)
    written = write_override_files(files, common.output_dir(args.out, "--out"))
    pairs = list(zip(files, written, strict=True))
    out.document(
        {
            "files": [
                {
                    "path": str(path),
                    "cuda_major": f.cuda_major,
                    "requirement": f.requirement,
                    "purpose": f.purpose,
                }
                for f, path in pairs
            ]
        }
    )
    rows = [[f"{f.cuda_major}.x", f.requirement, f.purpose, str(path)] for f, path in pairs]
    out.table(["CUDA", "requirement", "for", "file"], rows, "NCCL pins")
    return 0
