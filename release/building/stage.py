"""The build stage, whole: `prepare` (plan every cell's toolchain, stop on a cell that
cannot build here, provision the toolchains and build tools once) and `run_build` (every
cell through release.building.pipeline, side by side per CUDA version, then dist/'s manifest
and NCCL files). `release build`, the GPU gate and `release env` call these; what they
print comes through `BuildEvents` (release.building.events).

Device code depends on the CUDA version, not on the CPU arch: all cells share one device
cache, and the cells of one CUDA version build one after another so that the first
compiles the device code and the others find it in the cache.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from release import proc, workers
from release.backends import (
    DRIVER_LIBRARY,
    DRIVER_STUB,
    NVCC_HINT,
    PLACEMENT_HINT,
    BuildTools,
    EnvironmentSpec,
    backend_for,
    nvcc_problem,
    placement_problem,
)
from release.building.cache import source_digest
from release.building.events import BuildEvents, CellProgress
from release.building.pipeline import (
    build_cell,
    cell_inputs,
    nvcc_toolkit,
    record_cell,
    through_compile_cache,
)
from release.building.preparestep import build_sources
from release.building.settings import BuildEnv, BuildSettings, CellResult
from release.building.torchcell import build_environment
from release.credentials import without_credentials
from release.downstream.nccl import override_files, write_override_files
from release.errors import BuildError, ToolchainError
from release.fsutil import json_document, sha256_file
from release.inspection.wheel import WheelReport
from release.matrix import Cell
from release.records.dist import Reconciled, reconcile, stray_wheels
from release.records.manifest import (
    MANIFEST_NAME,
    Manifest,
    SdistEntry,
    WheelEntry,
    index_refs,
    read_manifest,
    write_manifest,
)
from release.toolchain import (
    BUILD_TOOL_PINS,
    PinSet,
    Progress,
    Toolchain,
    ToolchainPlan,
    envcache,
    host_machine,
    host_platform,
    install_pinset,
    provision,
)
from release.toolchain.buildenv import cell_plan, environment_of
from release.toolchain.torchenv import find_python

# ---------------------------------------------------------------- pure core


def schedule(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Cells grouped by CUDA version, in matrix order: groups may run side by side, the
    cells of one group one after another (they share device code)."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(str(cell.cuda), []).append(cell)
    return list(groups.values())


def buildable_problem(cell: Cell, plan: ToolchainPlan) -> ToolchainError | None:
    """Why the cell cannot build here with `plan` (its remedy in the hint), or None. A cell
    that compiles no device code needs no nvcc: its CUDA_HOME of headers and libraries
    comes from PyPI for any CUDA version."""
    backend = backend_for(cell.build.backend)
    missing = nvcc_problem(backend.name, str(cell.cuda), plan.device_compiler)
    if missing is not None and not cell.host_only:
        return ToolchainError(f"{cell.id}: {missing}", hint=NVCC_HINT.format(cuda=cell.cuda))
    elsewhere = placement_problem(backend.name, cell.arch, plan.host_arch)
    if elsewhere is not None:
        return ToolchainError(f"{cell.id}: {elsewhere}", hint=PLACEMENT_HINT.format(arch=cell.arch))
    # a system toolkit is used as it is: the driver's link stub must be there already
    stub = plan.cuda_home / DRIVER_STUB if plan.cuda_home else None
    if stub is not None and DRIVER_LIBRARY in cell.build.cuda_libraries and not stub.is_file():
        return ToolchainError(
            f"{cell.id}: build.cuda-libraries names cuda, the driver's libcuda, and the CUDA "
            f"toolkit at {plan.cuda_home} has no link stub of it ({stub})",
            hint="build with the toolchain's own CUDA_HOME, which makes one (leave out "
            "--cuda-home and CUDA_HOME), or with a toolkit that has lib64/stubs",
        )
    return None


def check_cells(cells: Sequence[Cell], plans: Mapping[str, ToolchainPlan]) -> None:
    """One ToolchainError naming every cell that cannot build here, and where it can
    (`plans` by `cell.id`)."""
    problems: list[str] = []
    hints: list[str] = []
    for cell in cells:
        error = buildable_problem(cell, plans[cell.id])
        if error is not None:
            problems.append(error.message)
            if error.hint and error.hint not in hints:
                hints.append(error.hint)
    if problems:
        raise ToolchainError(
            "\n".join(problems),
            hint="; ".join([*hints, "or leave these cells out with --cuda / --arch"]),
        )


def manifest_entry(cell: Cell, report: WheelReport, toolchain: Mapping[str, str]) -> WheelEntry:
    return WheelEntry.of(
        cell,
        filename=report.filename,
        size=report.size,
        sha256=report.sha256,
        sms=report.sms,
        ptx=report.ptx[0] if report.ptx else None,
        toolchain=toolchain,
        device_bytes=report.device_bytes,
    )


# ---------------------------------------------------------------- edge: toolchains


def plan_toolchains(settings: BuildSettings) -> dict[str, ToolchainPlan]:
    return {
        cell.id: cell_plan(cell, cuda_home=settings.cuda_home, cache_dir=settings.toolchain_dir)
        for cell in settings.cells
    }


def build_tools_pinset(host_arch: str) -> PinSet:
    return PinSet("cmake-ninja", BUILD_TOOL_PINS, host_platform(host_arch))


def provision_build_tools(
    cache_dir: Path,
    *,
    python: str = sys.executable,
    env: Mapping[str, str],
    runner: proc.Runner = proc.run,
    host_arch: str | None = None,
    progress: Progress | None = None,
) -> BuildTools:
    """cmake and ninja from PyPI into `cache_dir` (once), their binaries for the PATH.
    cmake's bin/ holds Python wrappers that need the package on sys.path: its binaries in
    cmake/data/bin come first; ninja's wheel puts its binary in bin/."""
    pinset = build_tools_pinset(host_arch or host_machine())
    root = cache_dir / pinset.dirname
    clean = without_credentials(env)
    install_pinset(pinset, root, runner, python=python, env=clean, progress=progress)
    dirs = (root / "cmake" / "data" / "bin", root / "bin")
    versions = []
    for directory, tool in zip(dirs, ("cmake", "ninja"), strict=True):
        binary = directory / tool
        if not binary.is_file():
            raise ToolchainError(
                f"{tool} not found in {root}",
                hint="the toolchain cache is incomplete: delete that directory and provision again",
            )
        done = runner([str(binary), "--version"], env=clean)
        first = done.output.strip().splitlines()[0] if done.output.strip() else ""
        versions.append(f"{tool} {first.rsplit(' ', 1)[-1]}" if done.ok else f"{tool} ?")
    return BuildTools(path=dirs, versions=tuple(versions))


def build_tools_for(
    cells: Sequence[Cell],
    *,
    cache_dir: Path,
    python: str = sys.executable,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> BuildTools:
    """cmake and ninja from PyPI where a cell's backend drives nvcc; nothing (and no
    download) where every cell is csrc's."""
    if not any(backend_for(cell.build.backend).needs_nvcc for cell in cells):
        return BuildTools()
    return provision_build_tools(cache_dir, python=python, env=env, progress=progress)


def provision_all(
    plans: Mapping[str, ToolchainPlan],
    python: str,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> dict[str, Toolchain]:
    """Provision each distinct plan once (the CUDA toolchain is shared by both arches)."""
    done: dict[ToolchainPlan, Toolchain] = {}
    out = {}
    for cell_id, plan in plans.items():
        if plan not in done:
            done[plan] = provision(
                plan, python=python, env=without_credentials(env), progress=progress
            )
        out[cell_id] = done[plan]
    return out


def prepare(
    settings: BuildSettings, events: BuildEvents
) -> tuple[BuildSettings, dict[str, Toolchain]]:
    """Every selected cell's toolchain, provisioned (and the build tools, in the returned
    settings), after checking that every cell builds here: nothing is downloaded for a
    build that could not finish. The torch environments are then pruned to their budget,
    never one this build (or another) uses."""
    budget = envcache.budget_of(settings.environ)
    plans = plan_toolchains(settings)
    check_cells(settings.cells, plans)
    for cell in settings.cells:
        spec = environment_of(cell)
        if spec is not None:  # its venv needs that CPython: said before any download
            find_python(spec.python, settings.environ)
    events.note(f"provisioning toolchains in {settings.toolchain_dir}")
    with events.downloads() as downloaded:
        tools = build_tools_for(
            settings.cells,
            cache_dir=settings.toolchain_dir,
            python=settings.python,
            env=settings.environ,
            progress=downloaded,
        )
        toolchains = provision_all(plans, settings.python, settings.environ, downloaded)
        environments = provision_environments(settings, toolchains, downloaded)
    if tools.versions:
        events.note(f"build tools: {', '.join(tools.versions)}")
        settings = replace(settings, build_tools=tools)
    for cell_id, environment in environments.items():
        events.note(f"{cell_id}: {environment.identity}")
    if environments:
        for line in pruned_notes(envcache.prune(settings.toolchain_dir, budget.size), budget):
            events.note(line)
    return replace(settings, environments=environments), toolchains


def pruned_notes(pruned: envcache.Pruned, budget: envcache.Budget) -> list[str]:
    """What a prune of the torch environments says: each one deleted, and where the rest
    stay over the budget because builds use them."""
    over = f"the torch environments' budget of {budget.describe()} ({budget.source})"
    lines = [
        f"pruned the torch environment {e.path.name} ({envcache.shown_size(e.size)}, the "
        f"least recently used): over {over}"
        for e in pruned.deleted
    ]
    if pruned.in_use:
        lines.append(
            f"the torch environments hold {envcache.shown_size(pruned.remaining)}, over "
            f"{over}: {len(pruned.in_use)} of them in use by builds now"
        )
    return lines


def provision_environments(
    settings: BuildSettings, toolchains: Mapping[str, Toolchain], progress: Progress
) -> dict[str, BuildEnv]:
    """The build environment of its own each cell's backend asks for (a torch cell's pinned
    torch in a venv of its Python, and its CUDA_HOME), once per distinct one."""
    out: dict[str, BuildEnv] = {}
    made: dict[EnvironmentSpec, BuildEnv] = {}
    for cell in settings.cells:
        spec = environment_of(cell)
        if spec is None:
            continue
        if spec not in made:
            toolkit = nvcc_toolkit(toolchains[cell.id])
            if toolkit is None:  # buildable_problem has stopped such a cell already
                raise ToolchainError(f"{cell.id}: the {cell.build.backend} backend needs nvcc")
            made[spec] = build_environment(
                spec,
                toolkit=toolkit.root,
                cache_dir=settings.toolchain_dir,
                python=settings.python,
                env=without_credentials(settings.environ),
                progress=progress,
                torch_indexes=settings.torch_indexes,
            )
        out[cell.id] = made[spec]
    return out


# ---------------------------------------------------------------- edge: the cells


def build_cells(
    settings: BuildSettings,
    toolchains: Mapping[str, Toolchain],
    progress: CellProgress,
    results: dict[str, CellResult],
) -> None:
    """Build every cell into `results` (by cell id). On SIGINT/SIGTERM (KeyboardInterrupt)
    every child process is ended, the cells in flight finish as failures within about a
    second, their staging folders are removed, and the interrupt propagates; `results`
    then holds what finished, for the caller to record."""
    settings.out.mkdir(parents=True, exist_ok=True)
    settings.device_log.unlink(missing_ok=True)
    sources = source_digest(build_sources(settings.matrix))
    stop = threading.Event()
    lock = threading.Lock()

    def run_group(group: list[Cell]) -> None:
        for cell in group:
            if stop.is_set() or proc.stopped():
                return
            progress("start", cell, None)
            result = build_cell(cell, toolchains[cell.id], settings, sources)
            with lock:
                results[cell.id] = result
            progress("done", cell, result)
            if not result.ok and settings.fail_fast:
                stop.set()

    pool = ThreadPoolExecutor(max_workers=max(1, settings.jobs))
    futures: list[Future[None]] = [pool.submit(run_group, g) for g in schedule(settings.cells)]
    try:
        for future in futures:
            workers.result(future)
    except BaseException:
        stop.set()
        proc.stop_all()
        wait(futures)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def device_warnings(device_log: Path) -> list[str]:
    """The damaged device-cache entries the device build reported (and rebuilt)."""
    try:
        lines = device_log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            record = json_document(line, str(device_log))
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("action") == "discarded":
            out.append(
                f"device cache entry for {record.get('kernel')} ({record.get('target')}) was "
                f"damaged: {record.get('detail')}; it was compiled again"
            )
    return out


def write_outputs(settings: BuildSettings, results: Sequence[CellResult]) -> Reconciled:
    """dist/manifest.json and the NCCL files: the wheels built now, plus same-version
    entries of cells this build did not attempt (see `reconcile`)."""
    built = [
        manifest_entry(cell, report, r.toolchain)
        for r in results
        if r.ok and r.report is not None
        for cell, report in ((r.cell, r.report), *((c.cell, c.report) for c in r.copies))
    ]
    path = settings.out / MANIFEST_NAME
    previous = read_manifest(path) if path.is_file() else None
    project = settings.matrix.project
    cells = {c.id: c for c in settings.matrix.cells}

    def intact(entry: WheelEntry) -> bool:
        wheel = settings.out / entry.filename
        return (
            wheel.is_file()
            and wheel.stat().st_size == entry.size
            and sha256_file(wheel) == entry.sha256
        )

    outcome = reconcile(
        previous,
        built,
        project=project.name,
        version=str(project.version),
        attempted=[c.id for c in settings.cells],
        cells=cells,
        intact=intact,
        epoch=settings.epoch,
        commit=settings.matrix.commit,
    )
    files = override_files(
        settings.matrix.nccl_pins([cells[w.cell] for w in outcome.manifest.wheels])
    )
    write_override_files(files, settings.out)
    manifest = replace(
        outcome.manifest,
        nccl_files=tuple(f.name for f in files),
        sdist=kept_sdist(previous, outcome.manifest, settings.out),
        indexes=index_refs(settings.matrix.indexes, outcome.manifest.wheels, str(project.version)),
    )
    write_manifest(manifest, path)
    return replace(outcome, manifest=manifest)


def kept_sdist(previous: Manifest | None, manifest: Manifest, out: Path) -> SdistEntry | None:
    """The sdist an earlier build of this version recorded, where its file is unchanged:
    a build of other cells into the same dist/ keeps it, as it keeps their wheels."""
    if previous is None or previous.sdist is None:
        return None
    if (previous.project, previous.version) != (manifest.project, manifest.version):
        return None
    sdist = previous.sdist
    path = out / sdist.filename
    intact = path.is_file() and path.stat().st_size == sdist.size
    return sdist if intact and sha256_file(path) == sdist.sha256 else None


def require_success(results: Sequence[CellResult], total: int) -> None:
    failed = [r for r in results if not r.ok]
    if failed or len(results) < total:
        names = ", ".join(r.cell.id for r in failed) or "none"
        raise BuildError(
            f"{len(failed)} of {total} cells failed ({names}); {total - len(results)} not started",
            hint="each failure above shows its log tail and the command that reproduces it",
        )


@dataclass(frozen=True, kw_only=True)
class BuildRun:
    settings: BuildSettings  # with the provisioned build tools
    results: list[CellResult]  # in the order of settings.cells
    outputs: Reconciled
    seconds: float


def run_build(settings: BuildSettings, events: BuildEvents) -> BuildRun:
    """The build stage: prepare, build every cell, write dist/ (also after SIGINT/SIGTERM:
    every wheel in dist/ gets its manifest entry), and say what dist/ now holds."""
    settings, toolchains = prepare(settings, events)
    events.note(f"SOURCE_DATE_EPOCH={settings.epoch}")
    for choice in dict.fromkeys(settings.compile_jobs_of(c) for c in settings.cells):
        events.note(f"compile jobs: {choice.jobs} a cell ({choice.reason})")
    if any(
        c.id in toolchains and through_compile_cache(c, toolchains[c.id]) for c in settings.cells
    ):
        cache = settings.compile_cache
        where = f" {settings.compile_root}" if cache.storage == "local" and not cache.dir else ""
        events.note(f"compile cache: {cache.describe()}{where} (sccache)")
    started = time.monotonic()
    collected: dict[str, CellResult] = {}
    with events.cells(len(settings.cells)) as progress:
        try:
            build_cells(settings, toolchains, progress, collected)
        finally:
            results = [collected[c.id] for c in settings.cells if c.id in collected]
            outputs = write_outputs(settings, results)
    for warning in device_warnings(settings.device_log):
        events.warning(warning)
    for name in outputs.kept:
        events.note(f"kept from the earlier build of this version: {name}")
    for line in outputs.dropped:
        events.note(f"left out of the manifest: {line}")
    dropped = {d.split(":", 1)[0] for d in outputs.dropped}
    for name in stray_wheels(settings.out, outputs.manifest):
        if name not in dropped:
            events.note(f"not in the manifest (ignored by publish): {name}")
    return BuildRun(
        settings=settings, results=results, outputs=outputs, seconds=time.monotonic() - started
    )


# ---------------------------------------------------------------- one cell, for builders elsewhere


def cell_inputs_for(
    settings: BuildSettings, toolchain: Toolchain, cell: Cell
) -> tuple[dict[str, str], dict[str, str]]:
    """(variables, config settings) that the cell's PEP 517 build gets from `release`
    (nothing of this process's own environment), for a builder other than `run_build`."""
    inputs = cell_inputs(cell, toolchain, settings, through_cache=False)
    env = {**inputs.env, "SOURCE_DATE_EPOCH": str(settings.epoch)}
    return dict(sorted(env.items())), dict(sorted(inputs.config_settings.items()))


def record_wheel(
    settings: BuildSettings, toolchain: Toolchain, cell: Cell, wheel: Path
) -> CellResult:
    """A wheel built elsewhere from the cell's inputs, through the checks of `run_build`;
    when it passes, it goes to dist/ with its manifest entry and the NCCL files."""
    result = record_cell(cell, wheel, toolchain, settings)
    if result.ok:
        write_outputs(settings, [result])
    return result
