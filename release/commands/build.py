"""`release build`: the selected cells into inspected, correctly tagged wheels in dist/."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from release.build import (
    BuildSettings,
    CellResult,
    build_cells,
    build_command,
    plan_toolchains,
    provision_all,
    require_success,
    schedule,
    write_outputs,
)
from release.commands.common import add_toolchain_options, cache_dir, cuda_home
from release.console import make_console, table
from release.matrix import Cell, load_matrix


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "build",
        parents=[common],
        help="build the wheels of the selected cells",
        description="Build, repair and inspect one wheel per selected cell; write "
        "dist/manifest.json and the NCCL override files.",
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument("--arch", action="append", default=[], choices=("x86_64", "aarch64"))
    parser.add_argument("--out", type=Path, default=Path("dist"), metavar="DIR")
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="CUDA versions built side by side"
    )
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    parser.add_argument("--dry-run", action="store_true", help="show what would run; build nothing")
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


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    settings = BuildSettings(
        matrix=matrix,
        cells=cells,
        out=args.out.resolve(),
        cache_dir=cache_dir(args),
        cuda_home=cuda_home(args),
        jobs=max(1, args.jobs),
        fail_fast=args.fail_fast,
        environ=dict(os.environ),
    )
    plans = plan_toolchains(settings)
    if args.dry_run:
        return _dry_run(settings, plans)
    err = sys.stderr
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    print(f"provisioning toolchains in {settings.cache_dir / 'toolchains'}", file=err)
    toolchains = provision_all(plans, settings.python)
    started = time.monotonic()
    lock = threading.Lock()

    def progress(event: str, cell: Cell, result: CellResult | None) -> None:
        with lock:
            if event == "start":
                print(f"... {cell.id}: building {cell.wheel_filename}", file=err)
                return
            if result is None:
                return
            print(_describe(result), file=err)
            if not result.ok:
                if in_actions:
                    print(f"::error title=release build {cell.id}::{result.error}", file=err)
                if result.log_tail:
                    print(f"--- last lines of {result.log} ---\n{result.log_tail}\n---", file=err)
                print(f"reproduce: {result.reproduce}", file=err)

    results = build_cells(settings, toolchains, progress)
    manifest, nccl = write_outputs(settings, results)
    elapsed = time.monotonic() - started
    if args.json:
        print(
            json.dumps(
                {
                    "ok": all(r.ok for r in results) and len(results) == len(cells),
                    "seconds": round(elapsed, 2),
                    "manifest": str(settings.out / "manifest.json"),
                    "cells": [
                        {
                            "cell": r.cell.id,
                            "ok": r.ok,
                            "cached": r.from_cache,
                            "seconds": round(r.seconds, 2),
                            "wheel": r.report.filename if r.report else None,
                            "sha256": r.report.sha256 if r.report else None,
                            "error": r.error,
                            "log": str(r.log) if r.log else None,
                        }
                        for r in results
                    ],
                    "nccl_files": [f.name for f in nccl],
                },
                indent=2,
            )
        )
    else:
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
        make_console().print(
            table(
                ["cell", "result", "time", "wheel", "size"],
                rows,
                title=f"{len([r for r in results if r.ok])}/{len(cells)} cells in "
                f"{elapsed:.1f} s -> {settings.out} ({len(manifest.wheels)} wheels in manifest)",
            )
        )
    require_success(results, len(cells))
    return 0


def _dry_run(settings: BuildSettings, plans: dict[str, Any]) -> int:
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
            f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k.startswith("RELEASE_")
        )
        console.print(f"{cell.id}: {inputs} {shlex.join(command)}", soft_wrap=True)
    return 0
