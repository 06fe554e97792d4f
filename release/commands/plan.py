"""Before tagging: list every cell with its wheel filename, size if built, destination and final
URL, the NCCL override files, and ask every destination (read-only) what it holds: new,
identical (skip) or CONFLICT, and each built wheel's growth since the previous release. Exits
non-zero on a conflict, a refused file, a destination's project size or growth limit passed, or
a missing toolchain. Changes nothing anywhere.

`release plan`: what a release of the matrix would publish, checked before tagging.

Read-only everywhere: it loads the matrix, resolves every cell's toolchain without
installing anything, reads the wheels already built in --dist, and asks each destination
(GET requests only) what it holds under each filename. Exit code 0 only when every file is
new or identical and every toolchain resolves.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release.commands.parsing import arguments, common
from release.commands.parsing.options import asked_url
from release.console import Output, markdown_table

if TYPE_CHECKING:
    from release.matrix import Matrix
    from release.nightly.plan import NightlyPlan
    from release.publish.plan import GateLine, PlanRow, ReleasePlan

COLUMNS = ("cell", "wheel", "size", "growth", "destination", "state", "final URL", "toolchain")


HELP = "show every cell, its wheel, destination and final URL, and what exists there"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "cells", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_dist_option(
        parser,
        "where built wheels and manifest*.json are (default: dist)",
    )
    parser.add_argument(
        "--expect-tag",
        metavar="TAG",
        help="fail unless TAG is the tag this matrix's version is released under",
    )
    parser.add_argument(
        "--repository-url",
        type=asked_url,
        metavar="URL",
        help="PyPI upload URL, as for `release publish`",
    )
    arguments.add_github_api_url_option(parser, "GitHub REST API base, as for `release publish`")
    parser.add_argument(
        "--build-tag",
        action="store_true",
        help="show a wheel whose name a destination holds other bytes under as "
        "`release publish --build-tag` sends it: the next build of that name (NAME-1-...whl)",
    )
    parser.add_argument(
        "--previous-manifest",
        metavar="FILE",
        type=Path,
        help="the previous release's release-manifest.json, to measure each wheel's growth "
        "against (default: the one of the highest published GitHub release below this version)",
    )
    arguments.add_channel_option(
        parser,
        "the HEAD commit's nightly: its version against the latest final releases, what "
        "/nightly/ serves, whether this commit would replace it, and what would be pruned",
    )
    arguments.add_markdown_option(parser, "write the plan as Markdown")
    arguments.add_toolchain_options(parser)


def summary(plan: ReleasePlan) -> str:
    from release.publish.plan import State

    counts: dict[str, int] = {}
    for row in plan.rows:
        counts[row.state.value] = counts.get(row.state.value, 0) + 1
    parts = [f"{counts[s.value]} {s.value}" for s in State if s.value in counts]
    built = sum(1 for r in plan.rows if r.built)
    text = f"{len(plan.rows)} cells, {built} built: " + (", ".join(parts) or "nothing")
    if plan.missing_toolchains:
        text += f"; {len(plan.missing_toolchains)} missing toolchain"
    return text


def _size(row: PlanRow) -> str:
    return "not built" if row.size is None else f"{row.size / 2**20:.2f} MiB"


def _growth(row: PlanRow, plan: ReleasePlan) -> str:
    if row.growth is not None:
        return row.growth.text
    return "new wheel" if plan.previous is not None and row.built else "-"


def _state(row: PlanRow) -> str:
    reason = row.reason
    if row.published_as and row.published_as not in reason:  # published under a build tag
        reason = "; ".join(filter(None, (f"as {row.published_as}", reason)))
    return row.state.value + (f": {reason}" if reason else "")


def table_rows(plan: ReleasePlan) -> list[list[str]]:
    return [
        [
            r.cell,
            r.wheel,
            _size(r),
            _growth(r, plan),
            r.destination,
            _state(r),
            r.url,
            r.toolchain.text,
        ]
        for r in (*plan.rows, *((plan.sdist,) if plan.sdist else ()))
    ]


def markdown(plan: ReleasePlan) -> str:
    from release.publish.plan import NO_GPU_GATE

    lines = [
        f"## Release plan: {plan.project} {plan.version}",
        "",
        summary(plan),
        "",
        markdown_table(COLUMNS, table_rows(plan)),
    ]
    if plan.nccl:
        lines += [
            "NCCL override files:",
            "",
            *(f"- `{n.name}`: `{n.requirement}` ({n.purpose})" for n in plan.nccl),
            "",
        ]
    if plan.gate:
        lines += ["GPU gate (before publishing):", "", *(f"- {t}" for t in gate_text(plan)), ""]
    else:
        lines += [f"**{NO_GPU_GATE}**", ""]
    lines += [plan.previous_note, ""]
    lines += [f"- **refused**: {p}" for p in (*plan.over_budget, *plan.too_grown)]
    lines += [f"- problem: {p}" for p in plan.problems]
    return "\n".join(lines) + "\n"


def gate_text(plan: ReleasePlan) -> list[str]:
    return [
        f"{g.runner.name} ({g.runner.arch}, sm {_sms(g)}): {', '.join(g.runs)}" for g in plan.gate
    ]


def _sms(line: GateLine) -> str:
    return " ".join(str(sm) for sm in line.runner.sms)


def to_json(plan: ReleasePlan) -> dict[str, Any]:
    from release.publish.plan import failure

    return {
        "project": plan.project,
        "version": plan.version,
        "ok": failure(plan) is None,
        "cells": [
            {
                "cell": r.cell,
                "wheel": r.wheel,
                "built": r.built,
                "size": r.size,
                "destination": r.destination,
                "url": r.url,
                "state": r.state.value,
                "reason": r.reason,
                "toolchain_ok": r.toolchain.ok,
                "toolchain": r.toolchain.text,
                "growth": None
                if r.growth is None
                else {
                    "previous_wheel": r.growth.previous_wheel,
                    "previous_size": r.growth.previous_size,
                    "bytes": r.growth.bytes,
                    "percent": None if r.growth.percent is None else round(r.growth.percent, 2),
                },
                # only for a wheel going (or gone) under a build tag, so that other documents
                # stay as they were
                **({"published_as": r.published_as} if r.published_as else {}),
            }
            for r in plan.rows
        ],
        "previous": None
        if plan.previous is None
        else {"version": plan.previous.version, "source": plan.previous.source},
        "previous_note": plan.previous_note,
        "over_project_limit": list(plan.over_budget),
        "over_growth_limit": list(plan.too_grown),
        "nccl_files": [
            {"file": n.name, "requirement": n.requirement, "purpose": n.purpose} for n in plan.nccl
        ],
        "problems": list(plan.problems),
        # only where the plan has the sdist's cell, so that other documents stay as they were
        **({"sdist": _sdist_json(plan.sdist)} if plan.sdist is not None else {}),
        "gpu_gate": [
            {
                "runner": g.runner.name,
                "arch": g.runner.arch,
                "sms": [str(sm) for sm in g.runner.sms],
                "runs": list(g.runs),
            }
            for g in plan.gate
        ]
        if plan.gate
        else None,
    }


def _sdist_json(row: PlanRow) -> dict[str, Any]:
    return {
        "sdist": row.wheel, "built": row.built, "size": row.size, "destination": row.destination,
        "url": row.url, "state": row.state.value, "reason": row.reason,
    }  # fmt: skip


def run(args: argparse.Namespace, out: Output) -> int:
    from release.building.settings import GivenOptions
    from release.commands.parsing import buildopts
    from release.destinations.reach import Reach
    from release.destinations.registry import kind_of
    from release.publish.growth import find_previous
    from release.publish.plan import NO_GPU_GATE, failure, make_plan, toolchain_verdicts
    from release.publish.run import default_factory
    from release.records.manifest import IndexRef, sdist_cell_of
    from release.toolchain.cacheroot import toolchain_cache

    matrix = common.load(args.matrix, out, cache_dir=args.cache_dir)
    environ = dict(os.environ)
    if args.channel == "nightly":
        return run_nightly(args, out, matrix, environ)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    cache_dir, cuda_home = buildopts.toolchain_dirs(
        GivenOptions(cache_dir=args.cache_dir, cuda_home=args.cuda_home), environ
    )
    verdicts = toolchain_verdicts(cells, cuda_home=cuda_home, cache=toolchain_cache(cache_dir))
    reach = Reach(
        environ,
        command="release plan",
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
        read_only=True,
    )
    previous, previous_note = find_previous(cells, manifest=args.previous_manifest, reach=reach)
    plan = make_plan(
        cells,
        dist=args.dist,
        verdicts=verdicts,
        factory=default_factory(reach),
        expect_tag=args.expect_tag,
        gate=matrix.gpu_gate,
        previous=previous,
        previous_note=previous_note,
        sdist=sdist if (sdist := sdist_cell_of(matrix.cells)) in cells else None,
        build_tag=args.build_tag,
        indexes=[IndexRef.of(i, matrix.project.version) for i in matrix.indexes.values()],
        index_check=lambda index, labels, project: kind_of(index.kind).check_index(
            index, labels, reach, project=project
        ),
    )
    out.table(COLUMNS, table_rows(plan), f"{plan.project} {plan.version}: release plan")
    for line in plan.nccl:
        out.line(f"NCCL: {line.name}: {line.requirement} ({line.purpose})")
    for text in [f"GPU gate: {t}" for t in gate_text(plan)] or [NO_GPU_GATE]:
        out.line(text)
    out.line(plan.previous_note)
    for refusal in (*plan.over_budget, *plan.too_grown):
        out.line(f"refused: {refusal}")
    out.line(f"plan: {summary(plan)}")
    common.write_report(out, to_json(plan), markdown(plan), args.markdown)
    error = failure(plan)
    if error is not None:
        raise error
    return 0


# --- release plan --channel nightly ---

NIGHTLY_COLUMNS = ("cell", "wheel", "size", "destination", "state", "URL")


def nightly_json(plan: NightlyPlan) -> dict[str, Any]:
    from release.nightly.plan import nightly_failure

    return {
        "project": plan.project,
        "version": plan.version,
        "channel": "nightly",
        "commit": plan.commit.sha,
        "ok": nightly_failure(plan) is None,
        "cells": [
            {
                "cell": r.cell,
                "wheel": r.wheel,
                "built": r.built,
                "size": r.size,
                "destination": plan.destination,
                "url": r.url,
                "state": r.state,
                "reason": r.reason,
            }
            for r in plan.rows
        ],
        "latest_final": [
            {"destination": f.destination, "version": f.version.public, "variant": f.variant}
            for f in plan.finals.releases
        ],
        "version_order_ok": plan.order is None,
        "problems": [plan.order.message] if plan.order else [],
        "nightly": None
        if plan.pointer is None
        else {
            "commit": plan.pointer.commit,
            "version": plan.pointer.version,
            "generation": plan.pointer.generation,
        },
        "promotes": plan.promotes,
        "keep": plan.keep,
        "keep_list": list(plan.pins),
        "prune": [
            {"commit": p.commit, "version": p.version, "action": p.action, "why": p.why}
            for p in plan.prunes
        ],
        "not_asked": [*plan.not_asked, *plan.finals.not_asked],
    }


def nightly_text(plan: NightlyPlan) -> list[str]:
    from release.nightly.finals import finals_lines

    pointer = plan.pointer
    now = f"{pointer.version} ({pointer.commit[:12]})" if pointer else "nothing yet"
    lines = finals_lines(plan.finals)
    if plan.order is not None:
        lines.append(f"refused: {plan.order.message}")
    lines.append(f"/nightly/ serves {now}")
    moves = "move /nightly/ to it" if plan.promotes else "not move /nightly/ (a newer one is there)"
    lines.append(f"{plan.version} ({plan.commit.sha[:12]}) would {moves}")
    lines.append(
        f"retention: keep {plan.keep} commits"
        + (f", and {', '.join(plan.pins)} (keep-list)" if plan.pins else "")
    )
    lines += [f"the next run prunes {p.version} ({p.action}): {p.why}" for p in plan.prunes]
    if not plan.prunes:
        lines.append("the next run prunes nothing")
    lines += [f"not asked: {n}" for n in (*plan.not_asked, *plan.finals.not_asked)]
    return lines


def run_nightly(
    args: argparse.Namespace, out: Output, release: Matrix, environ: Mapping[str, str]
) -> int:
    """`release plan --channel nightly` (boto3 is imported for the nightly channel only)."""
    from release.destinations.reach import Reach
    from release.nightly.plan import make_nightly_plan, nightly_failure

    nightly = common.channel_matrix(release, "nightly", environ)
    reach = Reach(
        environ,
        command="release plan --channel nightly",
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
        read_only=True,
    )
    plan = make_nightly_plan(release, nightly, dist=args.dist, reach=reach)
    rows = [
        [r.cell, r.wheel, "not built" if r.size is None else f"{r.size / 2**20:.2f} MiB",
         plan.destination, r.state + (f": {r.reason}" if r.reason else ""), r.url]
        for r in plan.rows
    ]  # fmt: skip
    out.table(NIGHTLY_COLUMNS, rows, f"{plan.project} {plan.version}: nightly plan")
    text = nightly_text(plan)
    for line in text:
        out.line(line)
    markdown = (
        f"## Nightly plan: {plan.project} {plan.version}\n\n"
        + markdown_table(NIGHTLY_COLUMNS, rows)
        + "".join(f"- {line}\n" for line in text)
    )
    common.write_report(out, nightly_json(plan), markdown, args.markdown)
    error = nightly_failure(plan)
    if error is not None:
        raise error
    return 0
