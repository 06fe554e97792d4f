"""Build, repair and inspect one wheel per selected cell; write dist/manifest.json and the NCCL
override files. Wheels are reproducible: SOURCE_DATE_EPOCH (default: the time of the last
commit) dates their files.

`release build`: the selected cells into inspected, correctly tagged wheels in dist/.

Before anything is provisioned, every cell that cannot build here (a cmake or torch cell
without nvcc for its CUDA version, or of another CPU arch) stops the build with exit 3;
cmake and ninja come from PyPI where a cell's backend drives nvcc.

With `--compare MANIFEST` the cells are built again from empty device and wheel caches
and each wheel is compared byte for byte with the one MANIFEST records.
"""

from __future__ import annotations

import argparse
import os
import shlex
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release.building.events import BuildEvents
from release.commands.parsing import arguments, common
from release.commands.parsing.options import WholeNumber
from release.console import Annotation, Output, markdown_table
from release.defaults import COMPILE_CACHE_VARIABLE, COMPILE_JOBS_RANGE
from release.errors import BuildError, ConfigError

if TYPE_CHECKING:
    from release.building.compare import Comparison
    from release.building.compilecache import CacheStats
    from release.building.events import CellProgress
    from release.building.excluded import ExcludedSm
    from release.building.settings import BuildSettings, CellResult, CopiedWheel
    from release.matrix import Cell, Matrix
    from release.matrix.compilecache import CompileCache
    from release.records.dist import Reconciled
    from release.records.manifest import Manifest, SdistEntry
    from release.toolchain import Progress, ToolchainPlan

JOBS = WholeNumber(1, 64)  # CUDA versions side by side: a matrix has a handful
COMPILE_JOBS = WholeNumber(*COMPILE_JOBS_RANGE)


HELP = "build the wheels of the selected cells"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "cells", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_output_dir(parser, "--out", "output directory (default: dist)")
    parser.add_argument(
        "--jobs",
        type=JOBS,
        default=1,
        metavar="N",
        help=f"CUDA versions built side by side ({JOBS.accepted}; default 1)",
    )
    parser.add_argument(
        "--compile-jobs",
        type=COMPILE_JOBS,
        default=None,
        metavar="N",
        help=f"compiles each cell's build runs at once ({COMPILE_JOBS.accepted}; default: "
        "matrix.yaml's build.compile-jobs, else from the CPUs and the memory available, "
        "3 GiB a compile)",
    )
    add_compile_cache_option(parser)
    arguments.add_channel_option(
        parser,
        "the commit's build under its dev version X.Y.Z.devN (N: the commit's time), every "
        "cell for matrix.yaml's nightly destination",
    )
    parser.add_argument(
        "--sdist",
        action="store_true",
        help="also build the project's sdist, once: where the selected cells include the "
        "default variant's first cell (no local label, a PyPI destination), else nothing",
    )
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    parser.add_argument("--dry-run", action="store_true", help="show what would run; build nothing")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="MANIFEST",
        help="rebuild from empty device and wheel caches and compare every wheel with the "
        "one MANIFEST records; exit 4 if any differs (--out keeps the rebuilt wheels). Where "
        "MANIFEST records an sdist, lying beside it, of a selected cell: rebuilt out of it",
    )
    arguments.add_toolchain_options(parser)


def add_compile_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--compile-cache",
        type=compile_cache_spec,
        default=None,
        metavar="STORAGE",
        help="where the cmake and torch backends' compiles and csrc's nvcc compiles (sccache) "
        "keep their objects, over "
        f"{COMPILE_CACHE_VARIABLE} and matrix.yaml's compile-cache: none, local, local:DIR, "
        "github-actions or s3://BUCKET/PREFIX?endpoint=URL&region=R (S3 keys from "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)",
    )


def compile_cache_spec(text: str) -> CompileCache:
    """argparse type of --compile-cache."""
    from release.matrix.compilecache import parse_compile_cache

    try:
        return parse_compile_cache(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def per_target(sizes: Sequence[tuple[str, int]]) -> str:
    """`sm_75 65 KiB, ..., ptx_100 47 KiB`: the bytes of each target's device code."""
    return ", ".join(f"{label} {size / 1024:.0f} KiB" for label, size in sizes)


def _describe(result: CellResult) -> str:
    if result.ok and result.report is not None:
        origin = "cached" if result.from_cache else "built"
        device = (
            "no device code"
            if result.cell.host_only
            else f"sm {' '.join(result.report.sms)}; ptx {' '.join(result.report.ptx) or '-'}"
        )
        return (
            f"ok {result.cell.id} {origin} in {result.seconds:.1f} s: {result.report.filename} "
            f"({result.report.size / 2**20:.2f} MiB; {device})"
            + (f"\n   device code: {per_target(result.report.device_bytes)}"
               if result.report.device_bytes else "")
            + (f"\n   {result.compile_cache.line()}" if result.compile_cache else "")
            + "".join(
                f"\n   relabelled for {c.cell.destination.name}: {c.report.filename}"
                for c in result.copies
            )
        )  # fmt: skip
    return f"FAILED {result.cell.id} after {result.seconds:.1f} s: {result.error}"


@contextmanager
def _out_dir(args: argparse.Namespace, reference: Path | None) -> Iterator[Path]:
    """--out, or dist/; with --compare and no --out a temporary directory."""
    if args.out is None and reference is not None:
        with tempfile.TemporaryDirectory(prefix="release-compare-") as tmp:
            yield Path(tmp)
        return
    out = common.output_dir(args.out or Path("dist"), "--out")
    if reference is not None and out == reference.resolve().parent:
        raise ConfigError(
            [f"--out {args.out}: the reference manifest's directory would be overwritten"],
            hint="give --compare a rebuild directory of its own, or leave --out out",
        )
    yield out


def run(args: argparse.Namespace, output: Output) -> int:
    from release.building.preview import refused_torches
    from release.building.sdist import from_the_sdist
    from release.building.settings import Sourced
    from release.building.stage import plan_toolchains, require_success, run_build
    from release.building.torchcell import run_reader
    from release.commands.parsing import buildopts
    from release.matrix.compilecache import CompileCache
    from release.records.manifest import read_manifest

    environ = dict(os.environ)
    loaded = common.load(args.matrix, output, cache_dir=args.cache_dir)
    matrix = common.channel_matrix(loaded, args.channel, environ)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    reference = read_manifest(args.compare) if args.compare is not None else None
    options = arguments.options_from(buildopts.BuildOptions, args)
    recorded = (
        Sourced(reference.source_date_epoch, f"the timestamp of {args.compare}")
        if reference is not None
        else None
    )
    given = buildopts.settings_from(
        options,
        matrix,
        environ,
        cells=cells,
        out=(args.out or Path("dist")).resolve(),
        recorded=recorded,
    )
    sdist_of = _sdist_cell(args, matrix, cells, output)
    if args.dry_run:
        return _dry_run(given, plan_toolchains(given), output)
    refused = refused_torches(given.cells, run_reader(given.torch_indexes))
    if refused:
        raise ConfigError(
            refused, hint="`release build --dry-run` says which torch each cell builds against"
        )
    with ExitStack() as stack:
        out = stack.enter_context(_out_dir(args, args.compare))
        fresh = (
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="release-fresh-cache-")))
            if reference is not None
            else None
        )
        chosen = replace(given, out=out, work_dir=fresh)
        unpacked = None
        if reference is not None:  # a comparison rebuilds from nothing: every compile runs
            chosen = replace(chosen, compile_cache=CompileCache(storage="none"))
            into = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="release-sdist-")))
            chosen, unpacked = from_the_sdist(chosen, reference, args.compare.parent, into)
            if unpacked is not None:
                output.note(f"the cells of this build are rebuilt from {unpacked}, unpacked")
        built = run_build(chosen, _Events(output))
        if reference is not None:
            return _report_comparison(
                args, built.settings, built.results, reference, output, from_sdist=unpacked
            )
        sdist = with_sdist(built.settings, built.outputs, sdist_of, output)
        _report(built.settings, built.results, built.outputs, built.seconds, output, sdist=sdist)
    require_success(built.results, len(cells))
    return 0


def _sdist_cell(
    args: argparse.Namespace, matrix: Matrix, cells: Sequence[Cell], output: Output
) -> Cell | None:
    """With --sdist, the cell whose build also builds the sdist, where it is selected."""
    from release.records.manifest import sdist_cell_of

    if not args.sdist:
        return None
    if args.channel == "nightly" or args.compare is not None:
        what = "--channel nightly" if args.channel == "nightly" else "--compare"
        raise ConfigError(
            [f"--sdist with {what}: an sdist is built for a release's publish only"],
            hint="leave --sdist out",
        )
    cell = sdist_cell_of(matrix.cells)
    if cell is None:  # every build job of a release passes --sdist: a note, not a failure
        output.note(
            "sdist: none, as no cell of the matrix goes to PyPI without a local label (an "
            "sdist goes to the default variant's PyPI destination only)"
        )
        return None
    if cell not in cells:
        output.note(f"sdist: built by the build of {cell.id}, not by this one")
        return None
    return cell


def with_sdist(
    settings: BuildSettings, outputs: Reconciled, cell: Cell | None, output: Output
) -> SdistEntry | None:
    """Build the sdist (with its cell's wheel built) and record it in dist/manifest.json."""
    from release.building.sdist import build_sdist
    from release.records.manifest import MANIFEST_NAME, sdist_filename, write_manifest

    manifest = outputs.manifest
    if cell is None or cell.id not in {w.cell for w in manifest.wheels}:
        return None
    log = settings.out / f"{sdist_filename(manifest.project, manifest.version)}.log"
    entry = build_sdist(settings, cell, log)
    write_manifest(replace(manifest, sdist=entry), settings.out / MANIFEST_NAME)
    output.note(f"ok sdist {entry.filename} ({entry.size / 1024:.0f} KiB) for {cell.id}'s PyPI")
    return entry


class _Events(BuildEvents):
    """The stage's progress on the terminal, in CI (groups, annotations) and in --json."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.lock = threading.Lock()

    def note(self, message: str) -> None:
        self.output.note(message)

    def warning(self, message: str) -> None:
        self.output.warning(message, title="release build")

    @contextmanager
    def downloads(self) -> Iterator[Progress]:
        with self.output.progress("toolchains", total=None, unit="bytes") as downloaded:
            yield lambda what, got, total: downloaded(got, total, what)

    @contextmanager
    def cells(self, total: int) -> Iterator[CellProgress]:
        finished: list[str] = []
        with self.output.progress("cells", total=total) as cells_done:

            def progress(event: str, cell: Cell, result: CellResult | None) -> None:
                with self.lock:
                    if event == "start":
                        self.output.note(f"... {cell.id}: building {cell.wheel_filename}")
                    elif result is not None:
                        finished.append(cell.id)
                        self._finished(result)
                        cells_done(len(finished), total, cell.id)

            yield progress

    def _finished(self, result: CellResult) -> None:
        output, cell = self.output, result.cell
        for warning in result.warnings:
            output.warning(warning, title=f"release build {cell.id}")
        output.note(_describe(result))
        with output.group(f"{cell.id}: build log"):
            if result.from_cache:
                output.note(f"{cell.wheel_filename}: from the wheel cache, not built")
            elif result.stopped:
                output.note(f"stopped by a signal; what it had done is in {result.log}")
            elif result.log is not None and result.log.is_file():
                output.note(result.log.read_text(encoding="utf-8", errors="replace"))
        if not result.ok:
            output.annotate(
                Annotation(
                    message=f"{result.error}\n{result.log_tail}".strip(),
                    title=f"release build {cell.id}",
                )
            )
            if result.log_tail:
                output.note(f"--- last lines of {result.log} ---\n{result.log_tail}\n---")
            output.note(f"reproduce: {result.reproduce}")


CELL_COLUMNS = ("cell", "result", "time", "wheel", "size", "device code", "compile cache")


def _cache_cell(stats: CacheStats | None) -> str:
    if stats is None:
        return "-"
    text = f"{stats.hits} hits, {stats.misses} misses"
    if stats.errors:
        text += f", {stats.errors} storage errors"
    return text + (" (store out of reach)" if stats.fallback else "")


def _cell_rows(results: Sequence[CellResult]) -> list[list[str]]:
    """A row per cell, and one per copy its wheel was relabelled for."""
    rows = []
    for r in results:
        rows.append(
            [
                r.cell.id,
                "ok" if r.ok else "FAILED",
                f"{r.seconds:.1f} s" + (" (cached)" if r.from_cache else ""),
                r.report.filename if r.report else "-",
                f"{r.report.size / 2**20:.2f} MiB" if r.report else "-",
                per_target(r.report.device_bytes) if r.report and r.report.device_bytes else "-",
                _cache_cell(r.compile_cache),
            ]
        )
        for c in r.copies:
            size = f"{c.report.size / 2**20:.2f} MiB"
            rows.append([r.cell.id, "relabelled", "-", c.report.filename, size, "-", "-"])
    return rows


def _report(
    settings: BuildSettings,
    results: list[CellResult],
    outputs: Reconciled,
    elapsed: float,
    output: Output,
    *,
    sdist: SdistEntry | None = None,
) -> None:
    from release.building.excluded import excluded_sms
    from release.inspection.budget import project_refusal, project_warning, release_loads

    cells = settings.cells
    excluded = excluded_sms(results)
    output.document(
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
                    "size": r.report.size if r.report else None,
                    "device_bytes": dict(r.report.device_bytes) if r.report else {},
                    "compile_cache": r.compile_cache.as_json() if r.compile_cache else None,
                    "error": r.error,
                    "warnings": list(r.warnings),
                    "log": str(r.log) if r.log else None,
                    # only cells an exclusion removed an SM from, so the others stay as they were
                    **_excluded_of(r.cell, excluded),
                    # only cells relabelled for other destinations, likewise
                    **({"copies": [_copy_json(c) for c in r.copies]} if r.copies else {}),
                }
                for r in results
            ],
            "kept": list(outputs.kept),
            "dropped": list(outputs.dropped),
            "nccl_files": list(outputs.manifest.nccl_files),
            # only where --sdist built one here, so that other documents stay as they were
            **({"sdist": _sdist_json(sdist)} if sdist is not None else {}),
        }
    )
    for load in release_loads(outputs.manifest.wheels):
        # past the limit too: `release plan` and `publish` will refuse the release
        near = project_refusal(load) or project_warning(load)
        if near is not None:
            output.warning(near, title="release build: project size")
    wheels = len(outputs.manifest.wheels)
    title = (
        f"{len([r for r in results if r.ok])}/{len(cells)} cells in {elapsed:.1f} s -> "
        f"{settings.out} ({wheels} wheels in manifest)"
    )
    output.table(CELL_COLUMNS, _cell_rows(results), title)
    for item in excluded:
        output.line(item.line())
    notes = "".join(f"\n- {item.line()}" for item in excluded)
    output.summary(
        f"## Build: {title}\n\n"
        + markdown_table(CELL_COLUMNS, _cell_rows(results))
        + (f"\nExcluded by matrix.yaml:\n{notes}\n" if notes else "")
    )


def _copy_json(copy: CopiedWheel) -> dict[str, Any]:
    return {
        "destination": copy.cell.destination.name,
        "local_label": copy.cell.local_label,
        "wheel": copy.report.filename,
        "sha256": copy.report.sha256,
        "size": copy.report.size,
    }


def _sdist_json(sdist: SdistEntry) -> dict[str, Any]:
    return {"filename": sdist.filename, "size": sdist.size, "sha256": sdist.sha256}


def _excluded_of(cell: Cell, excluded: Sequence[ExcludedSm]) -> dict[str, Any]:
    mine = [item.as_json() for item in excluded if item.cell == cell.id]
    return {"excluded": mine} if mine else {}


def _report_comparison(
    args: argparse.Namespace,
    settings: BuildSettings,
    results: list[CellResult],
    reference: Manifest,
    output: Output,
    *,
    from_sdist: str | None = None,
) -> int:
    from release.building.compare import compare
    from release.building.stage import require_success

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
    output.document(
        {
            "reference": str(args.compare),
            "source_date_epoch": settings.epoch,
            "identical": not different and len(comparisons) == len(settings.cells),
            "wheels": [vars(c) for c in comparisons],
            # only where the cells were rebuilt from the sdist, so other documents stay as
            # they were
            **({"from_sdist": from_sdist} if from_sdist is not None else {}),
        }
    )
    rows = [
        [c.cell, c.filename, "identical" if c.identical else "DIFFERENT", c.detail]
        for c in comparisons
    ]
    columns = ["cell", "wheel", "result", "detail"]
    unpacked = f" out of {from_sdist}" if from_sdist is not None else ""
    title = f"rebuilt from empty caches{unpacked} vs {args.compare}"
    output.table(columns, rows, title)
    output.summary(f"## Reproducibility: {title}\n\n" + markdown_table(columns, rows))
    require_success(results, len(settings.cells))
    if different:
        raise BuildError(
            f"{len(different)} of {len(comparisons)} wheels differ from {args.compare}: "
            "the build is not reproducible ("
            + "; ".join(f"{c.filename}: {c.detail}" for c in different[:3])
            + ")",
            hint="publish nothing built from this commit until both builds agree"
            + (
                f" (rebuilt out of {from_sdist}: it may lack a file the build reads)"
                if from_sdist is not None
                else ""
            ),
        )
    return 0


def _dry_run(settings: BuildSettings, plans: Mapping[str, ToolchainPlan], output: Output) -> int:
    from release.backends import DEFAULT_BACKEND
    from release.building.preview import planned
    from release.building.settings import SETTING_COLUMNS, SETTING_KEYS
    from release.building.stage import schedule

    cells = [
        planned(settings, cell, plans[cell.id])
        for group in schedule(settings.cells)
        for cell in group
    ]
    output.document(
        {
            "dry_run": True,
            "cells": [c.document() for c in cells],
            "settings": [dict(zip(SETTING_KEYS, row, strict=True)) for row in settings.sources],
        }
    )
    output.table(
        ["cell", "wheel", "device compiler", "host C compiler"],
        [[c.cell, c.wheel, c.device_compiler, c.host_cc] for c in cells],
        f"dry run: {len(settings.cells)} cells, nothing will be built",
    )
    output.table(list(SETTING_COLUMNS), [list(row) for row in settings.sources], "settings")
    for cell in cells:
        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in cell.inputs.items())
        how = "" if cell.backend == DEFAULT_BACKEND else f"{cell.backend} backend, {cell.builds}: "
        if cell.prepare is not None:
            output.line(f"{cell.cell}: first, the prepare step {cell.prepare}")
        output.line(f"{cell.cell}: {how}{shown} {shlex.join(cell.command)}")
        if cell.against is not None:
            output.line(f"{cell.cell}: builds against {cell.against[1]}")
        if cell.stable_abi is not None:
            output.line(f"{cell.cell}: {cell.stable_abi}")
        if cell.stable_torch is not None:
            output.line(f"{cell.cell}: stable ABI, built against {cell.stable_torch}")
        for note in cell.notes:
            output.line(f"{cell.cell}: {note}")
        for warning in cell.warnings:
            output.warning(warning, title=f"release build {cell.cell}")
    return 0
