"""`release plan`: what a release of the matrix would publish, checked before tagging.

Read-only everywhere: it loads the matrix, resolves every cell's toolchain without
installing anything, reads the wheels already built in --dist, and asks each destination
(GET requests only) what it holds under each filename. Exit code 0 only when every file is
new or identical and every toolchain resolves.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from release.commands.common import add_toolchain_options, cache_dir, cuda_home
from release.console import make_console, table
from release.dist import load_dist
from release.errors import ToolchainError
from release.manifest import WheelEntry
from release.matrix import Cell, load_matrix
from release.nccl import override_files
from release.plan import (
    COLUMNS,
    NcclLine,
    PlanRow,
    ReleasePlan,
    ToolchainVerdict,
    built_state,
    failure,
    markdown,
    summary,
    table_rows,
    tag_problems,
    to_json,
    unbuilt_entry,
    unbuilt_state,
)
from release.publish.base import decide
from release.publish.run import PublishSettings, default_factory, local_problem
from release.report import write_reports
from release.toolchain import present_dirs, resolve


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "plan",
        parents=[common],
        help="show every cell, its wheel, destination and final URL, and what exists there",
        description="Before tagging: list every cell with its wheel filename, size if built, "
        "destination and final URL, the NCCL override files, and ask every destination "
        "(read-only) what it holds: new, identical (skip) or CONFLICT. Exits non-zero on a "
        "conflict, a refused file or a missing toolchain. Changes nothing anywhere.",
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument("--arch", action="append", default=[], choices=("x86_64", "aarch64"))
    parser.add_argument(
        "--dist",
        type=Path,
        default=Path("dist"),
        metavar="DIR",
        help="where built wheels and manifest*.json are (default: dist)",
    )
    parser.add_argument(
        "--expect-tag",
        metavar="TAG",
        help="fail unless TAG is the tag this matrix's version is released under",
    )
    parser.add_argument(
        "--repository-url", metavar="URL", help="PyPI upload URL, as for `release publish`"
    )
    parser.add_argument(
        "--github-api-url", metavar="URL", help="GitHub REST API base, as for `release publish`"
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the plan as Markdown")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the plan as JSON")
    add_toolchain_options(parser)
    parser.set_defaults(func=run)


def toolchain_verdicts(
    cells: Sequence[Cell], *, cuda_home: Path | None, cache: Path
) -> dict[str, ToolchainVerdict]:
    """Each cell's toolchain as `release build` would resolve it; nothing is installed."""
    out: dict[str, ToolchainVerdict] = {}
    for cell in cells:
        try:
            plan = resolve(str(cell.cuda), cell.arch, cuda_home=cuda_home, cache_dir=cache)
        except ToolchainError as error:
            out[cell.id] = ToolchainVerdict(ok=False, text=f"missing: {error.message}")
            continue
        if plan.device is None:
            nvcc = (plan.cuda_home or Path("/usr/local/cuda")) / "bin" / "nvcc"
            ok = nvcc.is_file()
            text = f"nvcc at {nvcc}" if ok else f"missing: {nvcc} does not exist"
            out[cell.id] = ToolchainVerdict(ok=ok, text=text)
            continue
        present = present_dirs([plan])
        state = "provisioned" if plan.install_dir(plan.device) in present else "from PyPI"
        out[cell.id] = ToolchainVerdict(
            ok=True, text=f"{plan.device_compiler} {', '.join(plan.device.requirements)} ({state})"
        )
    return out


def built_entries(dist: Path) -> Mapping[str, WheelEntry]:
    """The manifest entries in `dist` by filename; none when nothing was built there."""
    if not any(dist.glob("manifest*.json")):
        return {}
    return load_dist(dist).by_filename()


def make_plan(
    cells: Sequence[Cell],
    *,
    dist: Path,
    verdicts: Mapping[str, ToolchainVerdict],
    settings: PublishSettings,
    environ: Mapping[str, str],
    client: httpx.Client,
    expect_tag: str | None,
) -> ReleasePlan:
    built = built_entries(dist)
    entries = {c.id: built.get(c.wheel_filename) or unbuilt_entry(c) for c in cells}
    by_destination: dict[str, list[Cell]] = {}
    for cell in cells:
        by_destination.setdefault(entries[cell.id].destination.name, []).append(cell)
    factory = default_factory(settings, environ, client)
    rows: dict[str, PlanRow] = {}
    for group in by_destination.values():
        destination = entries[group[0].id].destination
        publisher = factory(destination)
        remote = publisher.existing([entries[c.id] for c in group])
        for cell in group:
            entry = entries[cell.id]
            found = remote.get(entry.filename)
            is_built = entry.filename in built
            if is_built:
                wheel = dist / entry.filename
                refusal = local_problem(entry, wheel) or publisher.refusal(entry, wheel)
                decision = decide(
                    entry, found, refusal=refusal, replace=False, url=publisher.final_url(entry)
                )
                state, reason = built_state(decision)
                url = decision.url
            else:
                state, reason = unbuilt_state(found)
                url = publisher.final_url(entry) if found is None else found.url
            rows[cell.id] = PlanRow(
                cell=cell.id,
                wheel=entry.filename,
                built=is_built,
                size=entry.size if is_built else None,
                destination=f"{destination.name} ({destination.kind})",
                url=url,
                state=state,
                reason=reason,
                toolchain=verdicts[cell.id],
            )
    project = cells[0].project
    nccl = override_files({c.cuda.major: c.nccl for c in cells if c.nccl is not None})
    return ReleasePlan(
        project=project.name,
        version=str(project.version),
        rows=tuple(rows[c.id] for c in cells),
        nccl=tuple(
            NcclLine(file=f.name, requirement=f.requirement, purpose=f.purpose) for f in nccl
        ),
        problems=tuple(tag_problems(cells, str(project.version), expect_tag) if expect_tag else ()),
    )


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    environ = dict(os.environ)
    verdicts = toolchain_verdicts(
        cells, cuda_home=cuda_home(args), cache=cache_dir(args) / "toolchains"
    )
    settings = PublishSettings(
        dist=args.dist,
        dry_run=True,
        repository_url=args.repository_url,
        github_api_url=args.github_api_url,
    )
    with httpx.Client(timeout=60.0, follow_redirects=True) as client:
        plan = make_plan(
            cells,
            dist=args.dist,
            verdicts=verdicts,
            settings=settings,
            environ=environ,
            client=client,
            expect_tag=args.expect_tag,
        )
    console = make_console()
    console.print(table(COLUMNS, table_rows(plan), f"{plan.project} {plan.version}: release plan"))
    for line in plan.nccl:
        console.print(f"NCCL: {line.file}: {line.requirement} ({line.purpose})", soft_wrap=True)
    console.print(f"plan: {summary(plan)}", soft_wrap=True)
    write_reports(
        data=to_json(plan),
        markdown=markdown(plan),
        json_path=args.json,
        markdown_path=args.markdown,
        environ=environ,
    )
    error = failure(plan)
    if error is not None:
        if environ.get("GITHUB_ACTIONS") == "true":
            print(f"::error title=release plan::{error.message}", file=sys.stderr)
        raise error
    return 0
