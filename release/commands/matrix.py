"""Show the expanded cells: one wheel per (CUDA version, CPU arch).

`release matrix`: the expanded cells, as a table, JSON, or a GitHub Actions matrix.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from release.commands.parsing import arguments, common
from release.console import Output
from release.errors import ConfigError
from release.fsutil import UnreadableDocument, json_document

if TYPE_CHECKING:
    from release.matrix import Cell, Matrix

GITHUB_JOB_LIMIT = 256  # jobs one `strategy.matrix` may generate (GitHub Actions' limit)


def github_matrix(cells: Sequence[Cell], *, per: str = "cell") -> dict[str, Any]:
    """The `strategy.matrix` of a GitHub Actions job: an `include` list of flat entries.

    `per="cuda"` gives one entry per CUDA version (its arches listed together), for jobs that
    compile device code once per CUDA version and build every arch from it; `per="arch"` one
    per CUDA version and arch, what one runner builds (every torch and Python cell of it),
    with where it builds and the CPythons it builds with.
    """
    include: list[dict[str, Any]]
    if per == "cuda":
        include = [cuda_entry(group) for group in grouped(cells, by_arch=False)]
    elif per == "arch":
        include = [runner_entry(group) for group in grouped(cells, by_arch=True)]
    else:
        include = [cell_entry(cell) for cell in cells]
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


def grouped(cells: Sequence[Cell], *, by_arch: bool) -> list[list[Cell]]:
    groups: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((str(cell.cuda), cell.arch if by_arch else ""), []).append(cell)
    return list(groups.values())


def cuda_entry(group: Sequence[Cell]) -> dict[str, str]:
    return {
        "cuda": str(group[0].cuda),
        "arches": " ".join(dict.fromkeys(c.arch for c in group)),
        "label": group[0].local_label or "",
        "destination": group[0].destination.name,
        "wheels": " ".join(c.wheel_filename for c in group),
    }


def runner_entry(group: Sequence[Cell]) -> dict[str, str]:
    """One runner's cells: the build recipe, manylinux level and so the placement are the
    CUDA version's, shared by its cells of one arch."""
    from release.toolchain.placement import placement

    first = group[0]
    where = placement(first)
    pythons = dict.fromkeys(c.python or c.abi3 for c in group if c.python or c.abi3)
    return {
        "id": f"{first.cuda}-{first.arch}",
        "cuda": str(first.cuda),
        "arch": first.arch,
        "manylinux": first.manylinux,
        "runs_on": where.runs_on,
        "container": where.container,
        "cuda_home": where.cuda_home,
        "pythons": "\n".join(p for p in pythons if p),  # one a line, as setup-python takes them
        "wheels": " ".join(c.wheel_filename for c in group),
    }


def cell_entry(cell: Cell) -> dict[str, str | int | bool]:
    from release.toolchain.placement import placement

    where = placement(cell)
    return {
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
        "runs_on": where.runs_on,
        "container": where.container,
        "cuda_home": where.cuda_home,
        **torch_fields(cell),
        **({"compress_mode": cell.compress_mode} if cell.compress_mode else {}),
        **({"device_code": cell.device_code} if cell.host_only else {}),
    }


def torch_fields(cell: Cell) -> dict[str, str]:
    """A torch cell's own axes, for its job (none for the cells of other backends)."""
    if cell.torch is None:
        return {}
    return {"torch": str(cell.torch), "python": cell.python or "", "abi3": cell.abi3 or ""}


def runner_labels(text: str, names: Sequence[str]) -> dict[str, list[str]]:
    """`--runner-labels`: a JSON object that gives gpu-gate runners, by name, other `runs-on`
    labels (a list of strings, held to matrix.yaml's rule for a runner's labels)."""
    from release.matrix.rules import labels_problem

    option = "--runner-labels"
    try:
        given = json_document(text, option)
    except UnreadableDocument as error:
        raise ConfigError([str(error)]) from None
    if not isinstance(given, dict):
        raise ConfigError([f"{option}: a JSON object of runner names to labels, not {given!r:.40}"])
    problems: list[str] = []
    labels: dict[str, list[str]] = {}
    for name, value in given.items():
        if name not in names:
            known = ", ".join(names) or "none: matrix.yaml has no gpu-gate"
            problems.append(f"{option}: {name!r:.40} is not a gpu-gate runner (runners: {known})")
        elif problem := labels_problem(value):  # matrix.yaml's rule for a runner's labels
            problems.append(f"{option}: {name}: {problem}")
        else:
            labels[name] = list(cast("list[str]", value))
    if problems:
        raise ConfigError(
            problems, hint="runner names are what `release matrix --format gpu` lists"
        )
    return labels


def gate_matrix(
    matrix: Matrix, labels: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The `strategy.matrix` of the workflow's GPU job: one entry per runner, with the
    labels `labels` gives it, else matrix.yaml's."""
    gate = matrix.gpu_gate
    if gate is None:
        return {"include": []}
    given = labels or {}
    return {
        "include": [
            {
                "runner": runner.name,
                "labels": list(given.get(runner.name, runner.labels)),
                "arch": runner.arch,
                "sms": " ".join(str(sm) for sm in runner.sms),
            }
            for runner in gate.runners
        ]
    }


class _Format(argparse.Action):
    """`--format json` is `--json`: set while the line is parsed, so that the command's
    output (and its document on failure) is JSON from the start."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        if values == "json":
            namespace.json = True


HELP = "show the cells of the release matrix"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "cells", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        action=_Format,
        choices=("table", "json", "github", "gpu"),
        default="table",
        help="github: the `strategy.matrix` of an Actions job; gpu: that of the GPU gate job, "
        "one entry per gpu-gate runner (json: the same as --json)",
    )
    parser.add_argument(
        "--per",
        choices=("cell", "cuda", "arch"),
        default="cell",
        help="with --format github: one job per cell, per CUDA version, or per CUDA version "
        "and arch (what one runner builds: its torch and Python cells together)",
    )
    parser.add_argument(
        "--runner-labels",
        metavar="JSON",
        help="with --format gpu: other `runs-on` labels for gpu-gate runners, by name, as a "
        'JSON object ({"RUNNER": ["self-hosted", "h200"]}); the others keep matrix.yaml\'s',
    )
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of matrix.yaml and exit"
    )


def run(args: argparse.Namespace, out: Output) -> int:
    from release.matrix import cell_dict, matrix_json_schema

    if args.schema:
        print(json.dumps(matrix_json_schema(), indent=2))
        return 0
    matrix = common.load(args.matrix, out)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    if args.format == "gpu":
        names = [r.name for r in matrix.gpu_gate.runners] if matrix.gpu_gate else []
        labels = runner_labels(args.runner_labels, names) if args.runner_labels else None
        print(json.dumps(gate_matrix(matrix, labels), separators=(",", ":")))
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
    out.table(*table(matrix, cells))
    return 0


def table(matrix: Matrix, cells: Sequence[Cell]) -> tuple[list[str], list[list[str]], str]:
    """`release matrix`'s table: its headers, a row per copy of each cell, its title."""
    from release.matrix import nccl_requirement

    # a row per copy: a cell published to several places shows its wheel in each
    copies = [(c, c.as_copy(copy), n) for c in cells for n, copy in enumerate(c.copies)]
    row_cells = [c for c, _, _ in copies]
    rows = [
        [
            str(c.cuda),
            c.arch,
            "no device code" if c.host_only else " ".join(str(s) for s in c.sms),
            str(c.ptx) if c.ptx else "-",
            seen.local_label or "-",
            seen.wheel_filename,
            f"{seen.destination.name} ({seen.destination.kind})",
            nccl_requirement(c.cuda.major, c.nccl) if c.nccl else "-",
        ]
        for c, seen, _ in copies
    ]
    headers = ["CUDA", "arch", "SMs", "PTX", "label", "wheel", "destination", "NCCL"]
    if any(n for _, _, n in copies):
        at = headers.index("wheel") + 1
        headers.insert(at, "copy")
        for row, (_, _, n) in zip(rows, copies, strict=True):
            row.insert(at, "relabelled" if n else "built")
    if any(c.torch is not None for c in cells):
        headers.insert(2, "torch")
        for row, cell in zip(rows, row_cells, strict=True):
            row.insert(2, str(cell.torch) if cell.torch is not None else "-")
    # columns only a matrix that uses the setting gets, like torch's
    if any(c.excluded_sms for c in cells):
        at = headers.index("SMs") + 1
        headers.insert(at, "excluded")
        for row, cell in zip(rows, row_cells, strict=True):
            row.insert(at, " ".join(str(s) for s in cell.excluded_sms) or "-")
    if any(c.compress_mode for c in cells):
        at = headers.index("PTX") + 1
        headers.insert(at, "compress")
        for row, cell in zip(rows, row_cells, strict=True):
            row.insert(at, cell.compress_mode or "-")
    title = f"{matrix.project.name} {matrix.project.version}: {len(cells)} cells"
    if len(copies) > len(cells):
        title += f", {len(copies)} wheels (each built once and relabelled for its other copies)"
    return headers, rows, title
