"""Show the expanded cells: one wheel per (CUDA version, CPU arch).

`release matrix`: the expanded cells, as a table, JSON, or a GitHub Actions matrix.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from release.commands import arguments, common
from release.errors import ConfigError
from release.matrix import (
    Cell,
    Matrix,
    cell_dict,
    matrix_json_schema,
    nccl_requirement,
)

GITHUB_JOB_LIMIT = 256  # jobs one `strategy.matrix` may generate (GitHub Actions' limit)


def github_matrix(cells: Sequence[Cell], *, per: str = "cell") -> dict[str, Any]:
    """The `strategy.matrix` of a GitHub Actions job: an `include` list of flat entries.

    `per="cuda"` gives one entry per CUDA version (its arches listed together), for jobs that
    compile device code once per CUDA version and build every arch from it.
    """
    include: list[dict[str, str | int | bool]] = []
    if per == "cuda":
        versions = dict.fromkeys(str(c.cuda) for c in cells)
        for cuda in versions:
            group = [c for c in cells if str(c.cuda) == cuda]
            include.append(
                {
                    "cuda": cuda,
                    "arches": " ".join(dict.fromkeys(c.arch for c in group)),
                    "label": group[0].local_label or "",
                    "destination": group[0].destination.name,
                    "wheels": " ".join(c.wheel_filename for c in group),
                }
            )
    else:
        for cell in cells:
            include.append(
                {
                    "id": cell.id,
                    "cuda": str(cell.cuda),
                    "arch": cell.arch,
                    "sms": " ".join(str(s) for s in cell.sms),
                    "ptx": str(cell.ptx) if cell.ptx else "",
                    "label": cell.local_label or "",
                    "wheel": cell.wheel_filename,
                    "destination": cell.destination.name,
                    "nccl": str(cell.nccl) if cell.nccl else "",
                    "manylinux": cell.manylinux,
                    **torch_fields(cell),
                    **({"compress_mode": cell.compress_mode} if cell.compress_mode else {}),
                }
            )
    if len(include) > GITHUB_JOB_LIMIT:
        raise ConfigError(
            [
                f"--format github: {len(include)} jobs (one per {per}), over GitHub Actions' "
                f"limit of {GITHUB_JOB_LIMIT} jobs in one matrix"
            ],
            hint="split the cells over several jobs' matrices with --cuda and --arch"
            + ("" if per == "cuda" else ", or give a job a CUDA version's cells with --per cuda"),
        )
    return {"include": include}


def torch_fields(cell: Cell) -> dict[str, str]:
    """A torch cell's own axes, for its job (none for the cells of other backends)."""
    if cell.torch is None:
        return {}
    return {"torch": str(cell.torch), "python": cell.python or "", "abi3": cell.abi3 or ""}


def gate_matrix(matrix: Matrix) -> dict[str, Any]:
    """The `strategy.matrix` of the workflow's GPU job: one entry per runner."""
    gate = matrix.gpu_gate
    if gate is None:
        return {"include": []}
    return {
        "include": [
            {
                "runner": runner.name,
                "labels": list(runner.labels),
                "arch": runner.arch,
                "sms": " ".join(str(sm) for sm in runner.sms),
            }
            for runner in gate.runners
        ]
    }


HELP = "show the cells of the release matrix"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "cells", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("table", "json", "github", "gpu"),
        default="table",
        help="github: the `strategy.matrix` of an Actions job; gpu: that of the GPU gate job, "
        "one entry per gpu-gate runner (json: the same as --json)",
    )
    parser.add_argument(
        "--per",
        choices=("cell", "cuda"),
        default="cell",
        help="with --format github: one job per cell, or per CUDA version",
    )
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of matrix.yaml and exit"
    )


def run(args: argparse.Namespace) -> int:
    if args.format == "json":
        args.json = True
    out = common.output_for(args, "matrix")
    if args.schema:
        print(json.dumps(matrix_json_schema(), indent=2))
        return 0
    matrix = common.load(args.matrix, args, out)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    if args.format == "gpu":
        print(json.dumps(gate_matrix(matrix), separators=(",", ":")))
        return 0
    if args.format == "github":
        print(json.dumps(github_matrix(cells, per=args.per), separators=(",", ":")))
        return 0
    out.document(
        {
            "project": matrix.project.name,
            "version": str(matrix.project.version),
            "cells": [cell_dict(c) for c in cells],
        }
    )
    rows = [
        [
            str(c.cuda),
            c.arch,
            " ".join(str(s) for s in c.sms),
            str(c.ptx) if c.ptx else "-",
            c.local_label or "-",
            c.wheel_filename,
            f"{c.destination.name} ({c.destination.kind})",
            nccl_requirement(c.cuda.major, c.nccl) if c.nccl else "-",
        ]
        for c in cells
    ]
    headers = ["CUDA", "arch", "SMs", "PTX", "label", "wheel", "destination", "NCCL"]
    if any(c.torch is not None for c in cells):
        headers.insert(2, "torch")
        for row, cell in zip(rows, cells, strict=True):
            row.insert(2, str(cell.torch) if cell.torch is not None else "-")
    # columns only a matrix that uses the setting gets, like torch's
    if any(c.excluded_sms for c in cells):
        at = headers.index("SMs") + 1
        headers.insert(at, "excluded")
        for row, cell in zip(rows, cells, strict=True):
            row.insert(at, " ".join(str(s) for s in cell.excluded_sms) or "-")
    if any(c.compress_mode for c in cells):
        at = headers.index("PTX") + 1
        headers.insert(at, "compress")
        for row, cell in zip(rows, cells, strict=True):
            row.insert(at, cell.compress_mode or "-")
    title = f"{matrix.project.name} {matrix.project.version}: {len(cells)} cells"
    out.table(headers, rows, title)
    return 0
