"""On a GPU runner named in matrix.yaml's gpu-gate: run its test command against each wheel of
--dist for the runner's CPU arch as built, then against a PTX-only build of it for its lowest
SM; a torch cell's wheel beside each torch it is tested with (a stable-ABI wheel: the oldest
and the newest it admits). Exit 4 if any run fails. --dry-run says the runs and their
torches, and runs nothing.

`release gpu-gate`: the GPU tests of matrix.yaml's `gpu-gate`, run on this machine (one of
the named GPU runners) against the built wheels and a PTX-only build of each.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from release.commands.parsing import arguments, common
from release.console import Annotation, Output, markdown_table
from release.errors import BuildError, ConfigError

if TYPE_CHECKING:
    from release.building.gate import GateResult
    from release.building.gatetorch import GateStep

GATE_COLUMNS = ("run", "result", "time", "wheel", "detail")


HELP = "run the GPU tests of matrix.yaml's gpu-gate on the built wheels"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runner",
        required=True,
        metavar="NAME",
        help="which gpu-gate runner this machine is (its labels joined with '/')",
    )
    arguments.add_dist_option(
        parser,
        "the built wheels and their manifest (default: dist)",
    )
    parser.add_argument("--cuda", action="append", default=[], metavar="X.Y")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say the runs and the torch each runs beside (read from the wheels and their "
        "torch index); build and run nothing",
    )
    arguments.add_toolchain_options(parser)


def _rows(results: list[GateResult]) -> list[list[str]]:
    return [
        [r.name, "ok" if r.ok else "FAILED", f"{r.seconds:.1f} s", r.wheel, r.detail or "-"]
        for r in results
    ]


def plan_lines(steps: list[GateStep]) -> list[str]:
    """The gate's plan as it prints it: each run, and the torch it runs beside and why."""
    return [
        f"- {step.name}"
        + (f" ({step.beside.why})" if step.beside is not None else "")
        + (f": cannot run: {step.problem}" if step.problem is not None else "")
        for step in steps
    ]


def _step_json(step: GateStep) -> dict[str, str]:
    """What the --json document says of a run's torch (nothing for a cell without one)."""
    if step.beside is None:
        return {}
    return {"torch": str(step.beside.torch), "torch_why": step.beside.why}


def _plan_document(runner: str, steps: list[GateStep]) -> dict[str, Any]:
    """The --json document of --dry-run: each run, and the torch it runs beside."""
    runs = [
        {
            "cell": step.run.cell.id,
            "build": step.run.build,
            "name": step.name,
            **_step_json(step),
            **({"problem": step.problem} if step.problem else {}),
        }
        for step in steps
    ]
    return {"runner": runner, "dry_run": True, "runs": runs}


def _results_document(runner: str, results: list[GateResult]) -> dict[str, Any]:
    """The --json document of the runs made."""
    from release.building.gatetorch import GateStep

    runs = [
        {
            "cell": r.run.cell.id,
            "build": r.run.build,
            **_step_json(GateStep(run=r.run, beside=r.beside)),
            "expect_arch": r.run.expect_arch,
            "ok": r.ok,
            "seconds": round(r.seconds, 2),
            "wheel": r.wheel,
            "command": r.command,
            "detail": r.detail,
        }
        for r in results
    ]
    return {"runner": runner, "ok": all(r.ok for r in results), "runs": runs}


def run(args: argparse.Namespace, output: Output) -> int:
    from release.building.gate import gate_plan, run_gate
    from release.building.settings import Sourced
    from release.commands.parsing import buildopts
    from release.records.dist import load_dist

    matrix = common.load(args.matrix, output, cache_dir=args.cache_dir)
    gate = matrix.gpu_gate
    if gate is None:
        raise ConfigError(
            [f"{matrix.path.name} names no gpu-gate: there is nothing to run"],
            hint="add gpu-gate (runners and command) to matrix.yaml; "
            "`release matrix --schema` shows its keys",
        )
    runner = gate.runner(args.runner)
    cells = matrix.select(cuda=args.cuda, arch=[runner.arch])
    manifest = load_dist(args.dist.resolve(), missing_ok=False)
    environ = dict(os.environ)
    settings = buildopts.settings_from(
        arguments.options_from(buildopts.BuildOptions, args),
        matrix,
        environ,
        cells=(),
        out=args.dist.resolve(),
        recorded=Sourced(manifest.source_date_epoch, f"the timestamp of {args.dist}/manifest.json"),
    )

    def started(step: GateStep) -> None:
        output.note(f"... {step.name}")

    steps = gate_plan(gate, runner, cells, manifest=manifest, dist=args.dist.resolve())
    sms = " ".join(str(s) for s in runner.sms)
    output.note(f"GPU gate on {runner.name} (sm {sms}): {len(steps)} runs")
    output.note("\n".join(plan_lines(steps)))
    if args.dry_run:
        output.document(_plan_document(runner.name, steps))
        cannot = [step for step in steps if step.problem is not None]
        if cannot:
            raise BuildError(
                f"the GPU gate on {runner.name} cannot make {len(cannot)} of its "
                f"{len(steps)} runs: {cannot[0].name}: {cannot[0].problem}",
                hint="the plan above says why for each",
            )
        return 0
    results = run_gate(
        gate,
        steps,
        manifest=manifest,
        dist=args.dist.resolve(),
        settings=settings,
        environ=environ,
        cwd=matrix.path.parent,
        started=started,
    )
    for result in results:
        with output.group(f"{result.name}: test output"):
            output.note(f"$ {result.command}\n{result.output}" if result.command else result.detail)
        if not result.ok:
            output.annotate(Annotation(message=result.detail, title=f"GPU gate {result.name}"))
    failed = [r for r in results if not r.ok]
    output.document(_results_document(runner.name, results))
    title = f"GPU gate on {runner.name}: {len(results) - len(failed)}/{len(results)} runs passed"
    output.table(GATE_COLUMNS, _rows(results), title)
    output.summary(f"## {title}\n\n" + markdown_table(GATE_COLUMNS, _rows(results)))
    if failed:
        raise BuildError(
            f"the GPU gate failed on {runner.name}: "
            + "; ".join(f"{r.name}: {r.detail}" for r in failed[:3]),
            hint="nothing is published until every GPU run passes; "
            "the group of each run above holds its test output",
        )
    return 0
