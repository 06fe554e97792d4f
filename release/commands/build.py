"""`release build`: the selected cells into inspected, correctly tagged wheels in dist/.

With `--compare MANIFEST` the cells are built again from empty device and wheel caches
and each wheel is compared byte for byte with the one MANIFEST records.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from release import proc
from release.build import (
    BuildSettings,
    CellResult,
    build_cells,
    build_command,
    device_warnings,
    plan_toolchains,
    provision_all,
    require_success,
    schedule,
    source_date_epoch,
    write_outputs,
)
from release.commands.common import (
    add_toolchain_options,
    cache_dir,
    cuda_home,
    output_dir,
    positive_int,
)
from release.compare import Comparison, compare
from release.console import make_console, table
from release.dist import Reconciled, stray_wheels
from release.errors import BuildError, ConfigError
from release.manifest import Manifest, read_manifest
from release.matrix import Cell, load_matrix
from release.targets import ARCHES
from release.toolchain import ToolchainPlan


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "build",
        parents=[common],
        help="build the wheels of the selected cells",
        description="Build, repair and inspect one wheel per selected cell; write "
        "dist/manifest.json and the NCCL override files. Wheels are reproducible: "
        "SOURCE_DATE_EPOCH (default: the time of the last commit) dates their files.",
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument("--arch", action="append", default=[], choices=ARCHES)
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="output directory (default: dist)"
    )
    parser.add_argument(
        "--jobs", type=positive_int, default=1, metavar="N", help="CUDA versions built side by side"
    )
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    parser.add_argument("--dry-run", action="store_true", help="show what would run; build nothing")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="MANIFEST",
        help="rebuild from empty device and wheel caches and compare every wheel with the "
        "one MANIFEST records; exit 4 if any differs (--out keeps the rebuilt wheels)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_toolchain_options(parser)
    parser.set_defaults(func=run)


def _describe(result: CellResult) -> str:
    if result.ok and result.report is not None:
        origin = "cached" if result.from_cache else "built"
        return (
            f"ok {result.cell.id} {origin} in {result.seconds:.1f} s: {result.report.filename} "
            f"({result.report.size / 2**20:.2f} MiB; sm {' '.join(result.report.sms)}; "
            f"ptx {' '.join(result.report.ptx) or '-'})"
        )
    return f"FAILED {result.cell.id} after {result.seconds:.1f} s: {result.error}"


@contextmanager
def _out_dir(args: argparse.Namespace, reference: Path | None) -> Iterator[Path]:
    """--out, or dist/; with --compare and no --out a temporary directory."""
    if args.out is None and reference is not None:
        with tempfile.TemporaryDirectory(prefix="release-compare-") as tmp:
            yield Path(tmp)
        return
    out = output_dir(args.out or Path("dist"), "--out")
    if reference is not None and out == reference.resolve().parent:
        raise ConfigError(
            [f"--out {args.out}: the reference manifest's directory would be overwritten"],
            hint="give --compare a rebuild directory of its own, or leave --out out",
        )
    yield out


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    environ = dict(os.environ)
    reference = read_manifest(args.compare) if args.compare is not None else None
    epoch = _epoch(environ, matrix.project.path, reference)
    if args.dry_run:
        settings = BuildSettings(
            matrix=matrix,
            cells=cells,
            out=(args.out or Path("dist")).resolve(),
            cache_dir=cache_dir(args),
            cuda_home=cuda_home(args),
            jobs=args.jobs,
            environ=environ,
            epoch=epoch,
        )
        return _dry_run(settings, plan_toolchains(settings))
    with ExitStack() as stack:
        out = stack.enter_context(_out_dir(args, args.compare))
        fresh = (
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="release-fresh-cache-")))
            if reference is not None
            else None
        )
        settings = BuildSettings(
            matrix=matrix,
            cells=cells,
            out=out,
            cache_dir=cache_dir(args),
            work_dir=fresh,
            cuda_home=cuda_home(args),
            jobs=args.jobs,
            fail_fast=args.fail_fast,
            environ=environ,
            epoch=epoch,
        )
        results, outputs, elapsed = _build(settings)
        if reference is not None:
            return _report_comparison(args, settings, results, reference)
        _report(args, settings, results, outputs, elapsed)
    require_success(results, len(cells))
    return 0


def _epoch(environ: Mapping[str, str], project: Path, reference: Manifest | None) -> int:
    """SOURCE_DATE_EPOCH, else the reference's own timestamp (a comparison must build with
    the first build's), else the time of the project's last commit."""
    given = environ.get("SOURCE_DATE_EPOCH")
    if reference is not None and reference.source_date_epoch is not None and not given:
        return reference.source_date_epoch
    return source_date_epoch(environ, project, proc.run)


def _build(settings: BuildSettings) -> tuple[list[CellResult], Reconciled, float]:
    err = sys.stderr
    in_actions = settings.environ.get("GITHUB_ACTIONS") == "true"
    print(f"provisioning toolchains in {settings.cache_dir / 'toolchains'}", file=err)
    toolchains = provision_all(plan_toolchains(settings), settings.python, settings.environ)
    print(f"SOURCE_DATE_EPOCH={settings.epoch}", file=err)
    started = time.monotonic()
    lock = threading.Lock()

    def progress(event: str, cell: Cell, result: CellResult | None) -> None:
        with lock:
            if event == "start":
                print(f"... {cell.id}: building {cell.wheel_filename}", file=err)
                return
            if result is None:
                return
            for warning in result.warnings:
                print(f"warning: {warning}", file=err)
            print(_describe(result), file=err)
            if not result.ok:
                if in_actions:
                    print(f"::error title=release build {cell.id}::{result.error}", file=err)
                if result.log_tail:
                    print(f"--- last lines of {result.log} ---\n{result.log_tail}\n---", file=err)
                print(f"reproduce: {result.reproduce}", file=err)

    collected: dict[str, CellResult] = {}
    try:
        build_cells(settings, toolchains, progress, collected)
    finally:
        # Also after SIGINT/SIGTERM: every wheel in dist/ gets its manifest entry.
        results = [collected[c.id] for c in settings.cells if c.id in collected]
        outputs = write_outputs(settings, results)
    for warning in device_warnings(settings.device_log):
        print(f"warning: {warning}", file=err)
    for name in outputs.kept:
        print(f"kept from the earlier build of this version: {name}", file=err)
    for line in outputs.dropped:
        print(f"left out of the manifest: {line}", file=err)
    for name in stray_wheels(settings.out, outputs.manifest):
        if name not in {d.split(":", 1)[0] for d in outputs.dropped}:
            print(f"not in the manifest (ignored by publish): {name}", file=err)
    return results, outputs, time.monotonic() - started


def _report(
    args: argparse.Namespace,
    settings: BuildSettings,
    results: list[CellResult],
    outputs: Reconciled,
    elapsed: float,
) -> None:
    cells = settings.cells
    if args.json:
        print(
            json.dumps(
                {
                    "ok": all(r.ok for r in results) and len(results) == len(cells),
                    "seconds": round(elapsed, 2),
                    "manifest": str(settings.out / "manifest.json"),
                    "source_date_epoch": settings.epoch,
                    "cells": [
                        {
                            "cell": r.cell.id,
                            "ok": r.ok,
                            "cached": r.from_cache,
                            "seconds": round(r.seconds, 2),
                            "wheel": r.report.filename if r.report else None,
                            "sha256": r.report.sha256 if r.report else None,
                            "error": r.error,
                            "warnings": list(r.warnings),
                            "log": str(r.log) if r.log else None,
                        }
                        for r in results
                    ],
                    "kept": list(outputs.kept),
                    "dropped": list(outputs.dropped),
                    "nccl_files": list(outputs.manifest.nccl_files),
                },
                indent=2,
            )
        )
        return
    rows = [
        [
            r.cell.id,
            "ok" if r.ok else "FAILED",
            f"{r.seconds:.1f} s" + (" (cached)" if r.from_cache else ""),
            r.report.filename if r.report else "-",
            f"{r.report.size / 2**20:.2f} MiB" if r.report else "-",
        ]
        for r in results
    ]
    wheels = len(outputs.manifest.wheels)
    make_console().print(
        table(
            ["cell", "result", "time", "wheel", "size"],
            rows,
            title=f"{len([r for r in results if r.ok])}/{len(cells)} cells in "
            f"{elapsed:.1f} s -> {settings.out} ({wheels} wheels in manifest)",
        )
    )


def _report_comparison(
    args: argparse.Namespace,
    settings: BuildSettings,
    results: list[CellResult],
    reference: Manifest,
) -> int:
    assert args.compare is not None  # noqa: S101  # only called with --compare
    beside = args.compare.resolve().parent
    entries = reference.by_filename()
    comparisons: list[Comparison] = []
    for result in results:
        if not result.ok or result.wheel is None:
            continue
        name = result.cell.wheel_filename
        entry = entries.get(name)
        original = beside / name
        reference_bytes = original.read_bytes() if entry and original.is_file() else None
        comparisons.append(
            compare(result.cell.id, name, entry, reference_bytes, result.wheel.read_bytes())
        )
    different = [c for c in comparisons if not c.identical]
    if args.json:
        print(
            json.dumps(
                {
                    "reference": str(args.compare),
                    "source_date_epoch": settings.epoch,
                    "identical": not different and len(comparisons) == len(settings.cells),
                    "wheels": [vars(c) for c in comparisons],
                },
                indent=2,
            )
        )
    else:
        rows = [
            [c.cell, c.filename, "identical" if c.identical else "DIFFERENT", c.detail]
            for c in comparisons
        ]
        make_console().print(
            table(
                ["cell", "wheel", "result", "detail"],
                rows,
                title=f"rebuilt from empty caches vs {args.compare}",
            )
        )
    require_success(results, len(settings.cells))
    if different:
        raise BuildError(
            f"{len(different)} of {len(comparisons)} wheels differ from {args.compare}: "
            "the build is not reproducible ("
            + "; ".join(f"{c.filename}: {c.detail}" for c in different[:3])
            + ")",
            hint="publish nothing built from this commit until both builds agree",
        )
    return 0


def _dry_run(settings: BuildSettings, plans: Mapping[str, ToolchainPlan]) -> int:
    console = make_console()
    rows = []
    for group in schedule(settings.cells):
        for cell in group:
            plan = plans[cell.id]
            device = (
                f"nvcc from {plan.cuda_home}"
                if plan.device is None
                else f"{plan.device_compiler} ({', '.join(plan.device.requirements)})"
            )
            host = (
                " ".join(plan.system_cc or ())
                if plan.host_cc is None
                else f"zig ({plan.host_cc.requirements[0]})"
            )
            rows.append([cell.id, cell.wheel_filename, device, host])
    console.print(
        table(
            ["cell", "wheel", "device compiler", "host C compiler"],
            rows,
            title=f"dry run: {len(settings.cells)} cells, nothing will be built",
        )
    )
    for cell in settings.cells:
        env = settings.cell_env(
            cell, {"RELEASE_DEVICE_COMPILER": plans[cell.id].device_compiler}, base={}
        )
        command = build_command(settings.python, settings.matrix.project.path, settings.out)
        inputs = " ".join(
            f"{k}={shlex.quote(v)}"
            for k, v in sorted(env.items())
            if k.startswith("RELEASE_") or k == "SOURCE_DATE_EPOCH"
        )
        console.print(f"{cell.id}: {inputs} {shlex.join(command)}", soft_wrap=True)
    return 0
