"""Provision the toolchain of one cell (as `release build` does) and print the RELEASE_* build
inputs of csrc/BUILDING.md as `export` lines, or write them as a dotenv file. With --record,
check a wheel built from them elsewhere (cibuildwheel) as `release build` checks its own and add
it to the manifest in --dist.

`release env`: one cell's build inputs, for builders other than `release build`.

cibuildwheel builds the kernel project inside a stock manylinux_2_28 container. There,
`release env --cuda X --arch Y` provisions the cell's toolchain from PyPI exactly as
`release build` does and writes the RELEASE_* inputs of csrc/BUILDING.md (those
release.building.pipeline gives the cell's build) as `export` lines or, with `--out FILE`, a
dotenv file.
`--record WHEEL` takes the wheel such a builder produced through the checks of `release
build` (auditwheel, the cell's exact platform tag, the fatbin inspection) into `--dist`
with its manifest entry, so that `release publish` treats it like any other.

A cell whose `build.backend` is `cmake` or `torch` gets that backend's inputs instead
(CMAKE_CUDA_ARCHITECTURES / CUDAARCHS / CMAKE_ARGS, or TORCH_CUDA_ARCH_LIST, with nvcc),
and a wheel it built is given the cell's local label by rewriting before the checks.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from release.building.events import BuildEvents
from release.commands.parsing import arguments, common
from release.console import Output
from release.errors import ConfigError
from release.fsutil import write_atomic
from release.targets import ARCHES

if TYPE_CHECKING:
    from release.matrix import Cell
    from release.wheelfile import WheelName

HELP = "provision one cell's toolchain and print its build inputs"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cuda", required=True, metavar="X.Y")
    parser.add_argument("--arch", required=True, choices=ARCHES)
    arguments.add_output_file(
        parser, "--out", "write KEY='value' lines to FILE instead (its directory must exist)"
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="WHEEL|DIR",
        help="the cell's wheel (or a directory holding it) built from these inputs",
    )
    arguments.add_dist_option(
        parser,
        "where --record puts the wheel, manifest.json and the NCCL files; the device "
        "log goes to DIR/logs (default: dist)",
        written=True,
    )
    arguments.add_toolchain_options(parser)


# ---------------------------------------------------------------- pure core


def export_lines(inputs: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in inputs.items())


def dotenv_text(inputs: Mapping[str, str]) -> str:
    """KEY='value' lines: a dotenv file that a POSIX shell can also source."""
    return "".join(f"{k}={shlex.quote(v)}\n" for k, v in inputs.items())


# ---------------------------------------------------------------- edge


RECORD_HINT = "give the .whl file the builder made, or the directory holding it"


def _same_release(filename: str, wanted: WheelName) -> bool:
    """Whether `filename` names a wheel of `wanted`'s distribution and version."""
    from release.wheelfile import NotAWheel, WheelName

    try:
        found = WheelName.parse(filename)
    except NotAWheel:
        return False
    return (found.distribution, found.version) == (wanted.distribution, wanted.version)


def find_wheel(path: Path, cell: Cell) -> Path:
    """The cell's wheel: `path` itself, or the one wheel of the cell in directory `path`.
    ConfigError naming the path where it is not a readable wheel, before anything is
    provisioned or written."""
    from release.wheelfile import NotAWheel, WheelName, readable_wheel

    wheel = path
    if path.is_dir():
        wanted = cell.wheel_name
        prefix = f"{wanted.distribution}-{wanted.version}-"
        found = sorted(p for p in path.glob("*.whl") if _same_release(p.name, wanted))
        arch = [p for p in found if WheelName.parse(p.name).platform.endswith(f"_{cell.arch}")]
        if len(arch) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise ConfigError(
                [f"--record {path}: expected one {prefix}*_{cell.arch}.whl, found {names}"]
            )
        wheel = arch[0]
    try:
        readable_wheel(wheel)
    except NotAWheel as why:
        raise ConfigError([f"--record {wheel}: {why}"], hint=RECORD_HINT) from None
    return wheel


class _Notes(BuildEvents):
    def note(self, message: str) -> None:
        print(message, file=sys.stderr)


def run(args: argparse.Namespace, output: Output) -> int:
    from release.building.stage import cell_inputs_for, prepare, record_wheel, require_success
    from release.commands.parsing import buildopts

    matrix = common.load(args.matrix, output, cache_dir=args.cache_dir)
    cell = matrix.select(cuda=[args.cuda], arch=[args.arch])[0]
    recorded = find_wheel(args.record, cell) if args.record is not None else None
    environ = dict(os.environ)
    options = arguments.options_from(buildopts.BuildOptions, args)
    given = buildopts.settings_from(
        options, matrix, environ, cells=(cell,), out=args.dist.resolve()
    )
    settings, toolchains = prepare(given, _Notes())
    toolchain = toolchains[cell.id]
    dist = settings.out
    inputs, config_settings = cell_inputs_for(settings, toolchain, cell)
    if recorded is not None:
        result = record_wheel(settings, toolchain, cell, recorded)
        output.document(
            {
                "cell": cell.id,
                "ok": result.ok,
                "wheel": result.report.filename if result.report else None,
                "sha256": result.report.sha256 if result.report else None,
                "error": result.error,
            }
        )
        if result.ok:
            output.note(f"recorded {cell.id}: {dist / cell.wheel_filename}")
        else:
            output.note(f"FAILED {cell.id}: {result.error}\n{result.log_tail}")
        require_success([result], 1)
        return 0
    output.document(
        {
            "cell": cell.id,
            "backend": cell.build.backend,
            "inputs": inputs,
            "config_settings": config_settings,
        }
    )
    if config_settings:
        shown = " ".join(shlex.quote(f"-C{k}={v}") for k, v in config_settings.items())
        output.note(f"{cell.id}: the PEP 517 build also takes the config settings {shown}")
    if args.out is not None:
        write_atomic(args.out, dotenv_text(inputs).encode())
        output.note(f"wrote {len(inputs)} build inputs of {cell.id} to {args.out}")
    elif not args.json:
        sys.stdout.write(export_lines(inputs))
    return 0
