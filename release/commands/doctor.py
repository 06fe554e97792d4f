"""`release doctor`: per CUDA version and arch, which tools a build will use and from where."""

from __future__ import annotations

import argparse
from typing import Any

from release.commands.common import add_toolchain_options, cache_dir, cuda_home
from release.console import make_console, table
from release.matrix import load_matrix
from release.toolchain import DoctorRow, doctor_rows, present_dirs, provision, resolve


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="show the toolchain of every CUDA version and arch",
        description="Show, per CUDA version and arch, the device compiler, the host C "
        "compiler and the fatbin inspector that a build would use, and where each comes from.",
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument("--arch", action="append", default=[], choices=("x86_64", "aarch64"))
    parser.add_argument(
        "--provision",
        action="store_true",
        help="install missing toolchains and show the versions the tools report",
    )
    add_toolchain_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    root = cache_dir(args) / "toolchains"
    plans = list(
        dict.fromkeys(
            resolve(str(c.cuda), c.arch, cuda_home=cuda_home(args), cache_dir=root) for c in cells
        )
    )
    toolchains = None
    if args.provision:
        toolchains = {(p.cuda, p.target_arch): provision(p) for p in plans}
    rows = doctor_rows(plans, toolchains=toolchains, present=present_dirs(plans))
    make_console().print(
        table(
            list(DoctorRow.COLUMNS), [list(r.cells()) for r in rows], title=f"toolchains in {root}"
        )
    )
    return 0
