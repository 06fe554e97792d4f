"""`release env`: one cell's build inputs, for builders other than `release build`.

cibuildwheel builds the kernel project inside a stock manylinux_2_28 container. There,
`release env --cuda X --arch Y` provisions the cell's toolchain from PyPI exactly as
`release build` does and writes the RELEASE_* inputs of csrc/BUILDING.md (the environment
`release.build.cells.cell_env` makes) as `export` lines or, with `--out FILE`, a dotenv file.
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
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from release import proc
from release.build import project as projectbuild
from release.build.cells import (
    BuildSettings,
    CellResult,
    outcome,
    project_build,
    require_success,
    source_date_epoch,
    toolchain_summary,
    write_outputs,
)
from release.commands.common import (
    Parents,
    add_dist_option,
    add_toolchain_options,
    cache_dir,
    cuda_home,
    output_for,
)
from release.credentials import without_credentials
from release.errors import BuildError, ConfigError
from release.fsutil import write_atomic
from release.inspection.certify import certify
from release.inspection.wheel import WheelReport
from release.matrix import Cell, load_matrix
from release.targets import ARCHES
from release.toolchain import Toolchain, provision, resolve

# Variables of the build environment that are not build inputs.
NOT_INPUTS = frozenset({"PATH", "PIP_DISABLE_PIP_VERSION_CHECK"})


def register(subparsers: Any, parents: Parents) -> None:
    parser = subparsers.add_parser(
        "env",
        parents=[parents.matrix, parents.output],
        help="provision one cell's toolchain and print its build inputs",
        description="Provision the toolchain of one cell (as `release build` does) and print "
        "the RELEASE_* build inputs of csrc/BUILDING.md as `export` lines, or write them as a "
        "dotenv file. With --record, check a wheel built from them elsewhere (cibuildwheel) "
        "as `release build` checks its own and add it to the manifest in --dist.",
    )
    parser.add_argument("--cuda", required=True, metavar="X.Y")
    parser.add_argument("--arch", required=True, choices=ARCHES)
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write KEY='value' lines to FILE instead"
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="WHEEL|DIR",
        help="the cell's wheel (or a directory holding it) built from these inputs",
    )
    add_dist_option(
        parser,
        "where --record puts the wheel, manifest.json and the NCCL files; the device "
        "log goes to DIR/logs (default: dist)",
    )
    add_toolchain_options(parser)
    parser.set_defaults(func=run)


# ---------------------------------------------------------------- pure core


def build_inputs(
    cell: Cell, toolchain_env: Mapping[str, str], settings: BuildSettings
) -> dict[str, str]:
    """The inputs `release build` gives the cell's PEP 517 build (nothing of this process's
    own environment)."""
    env = settings.cell_env(cell, toolchain_env, base={})
    return {k: v for k, v in sorted(env.items()) if k not in NOT_INPUTS}


def export_lines(inputs: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in inputs.items())


def dotenv_text(inputs: Mapping[str, str]) -> str:
    """KEY='value' lines: a dotenv file that a POSIX shell can also source."""
    return "".join(f"{k}={shlex.quote(v)}\n" for k, v in inputs.items())


def find_wheel(path: Path, cell: Cell) -> Path:
    """The cell's wheel: `path` itself, or the one wheel of the cell in directory `path`."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError([f"--record {path}: no such file or directory"])
    prefix = f"{cell.project.wheel_name}-{cell.version}-"
    found = sorted(p for p in path.glob("*.whl") if p.name.startswith(prefix))
    arch = [p for p in found if p.name.endswith(f"_{cell.arch}.whl")]
    if len(arch) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise ConfigError(
            [f"--record {path}: expected one {prefix}*_{cell.arch}.whl, found {names}"]
        )
    return arch[0]


# ---------------------------------------------------------------- edge


def _provision(cell: Cell, args: argparse.Namespace, environ: dict[str, str]) -> Toolchain:
    plan = resolve(
        str(cell.cuda),
        cell.arch,
        cuda_home=cuda_home(args),
        cache_dir=cache_dir(args) / "toolchains",
    )
    print(f"provisioning toolchains in {plan.cache_dir}", file=sys.stderr)
    return provision(plan, python=sys.executable, env=without_credentials(environ))


def run(args: argparse.Namespace) -> int:
    output = output_for(args, "env")
    matrix = load_matrix(args.matrix)
    cell = matrix.select(cuda=[args.cuda], arch=[args.arch])[0]
    environ = dict(os.environ)
    toolchain = _provision(cell, args, environ)
    dist = args.dist.resolve()
    settings = BuildSettings(
        matrix=matrix,
        cells=(cell,),
        out=dist,
        cache_dir=cache_dir(args),
        cuda_home=cuda_home(args),
        environ=environ,
        epoch=source_date_epoch(environ, matrix.project.path, proc.run),
    )
    config_settings: dict[str, str] = {}
    if cell.build.backend == "release":
        inputs = build_inputs(cell, toolchain.build_env(), settings)
    else:
        projectbuild.require_buildable(cell.build, cell, toolchain.plan)
        backend = projectbuild.cell_inputs(cell, project_build(cell, toolchain, settings))
        inputs = dict(sorted({**backend.env, "SOURCE_DATE_EPOCH": str(settings.epoch)}.items()))
        config_settings = dict(sorted(backend.config_settings.items()))
    if args.record is not None:
        result = record(cell, find_wheel(args.record, cell), toolchain, settings)
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
            write_outputs(settings, [result])
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


def record(cell: Cell, wheel: Path, toolchain: Toolchain, settings: BuildSettings) -> CellResult:
    """The checks `release build` makes after its PEP 517 build, on a wheel built elsewhere:
    auditwheel's verdict, the cell's exact platform tag, the device-code inspection (a cmake
    or torch cell's wheel first gets the cell's local label, as `release build` gives it)."""
    start = time.monotonic()
    log = settings.out / "logs" / f"{cell.id}.log"
    summary = toolchain_summary(toolchain)
    env = {**without_credentials(settings.environ), "SOURCE_DATE_EPOCH": str(settings.epoch)}

    settings.out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cell.id}.", dir=settings.out))

    def work() -> tuple[Path, WheelReport, bool, tuple[str, ...]]:
        copy = staging / wheel.name
        shutil.copyfile(wheel, copy)
        if cell.build.backend != "release":
            copy = projectbuild.relabelled(copy, cell)
        candidate, report = certify(copy, cell, toolchain, python=settings.python, env=env, log=log)
        final = settings.out / candidate.name
        write_atomic(final, candidate.read_bytes())
        return final, report, False, ()

    try:
        return outcome(cell, work, start=start, log=log, toolchain=summary)
    except OSError as error:
        raise BuildError(f"{wheel}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
