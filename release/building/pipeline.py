"""The one road of a cell, whatever its backend: its build inputs (the backend's, from
release.backends) and environment, the PEP 517 build in a staging folder, exactly one
wheel, auditwheel's verdict, the cell's local label (rewritten where the backend cannot
set it) and exact platform tag, the inspection, and the wheel cache. `build_cell` is
`release build`'s and the GPU gate's; `record_cell` takes a wheel built elsewhere
(`release env --record`) through the same checks.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from release import proc
from release.backends import (
    BuildContext,
    BuildInputs,
    NvccToolkit,
    backend_for,
    build_inputs,
    with_path,
)
from release.backends.archflags import (
    Stop,
    cell_request,
    matrix_targets,
    stop_in_log,
    stop_message,
)
from release.backends.compiled import foreign_code_problem, foreign_device_code
from release.building.cache import recipe, wheel_cache_key
from release.building.compilecache import (
    CacheStats,
    CompileCacheError,
    sccache_binary,
    start_server,
)
from release.building.diagnose import failure_cause
from release.building.jobs import killed_for_memory, memory_remedy
from release.building.relabel import RelabelError, rewrite_version
from release.building.settings import BuildEnv, BuildSettings, CellFailure, CellResult
from release.building.torchcell import tags_problem
from release.credentials import without_credentials
from release.errors import BuildError
from release.fsutil import write_atomic
from release.inspection.devicecode import is_shared_object
from release.inspection.verdict import inspected, manylinux_verdict
from release.inspection.wheel import WheelReport, budget_warning
from release.matrix import Cell
from release.matrix.compilecache import CompileCache
from release.targets import target_problem
from release.toolchain import Toolchain, frontend
from release.toolchain.buildenv import cell_targets, cuda_home_of

# ---------------------------------------------------------------- pure core


def build_command(
    python: str, project: Path, outdir: Path, *, isolated: bool = True, requires: Sequence[str] = ()
) -> list[str]:
    """The PEP 517 build; a torch cell's runs in its torch environment, without isolation,
    so that it compiles against exactly the pinned torch (which holds the matrix's build
    requirements too). An isolated build with build requirements of the matrix's goes
    through release.toolchain.frontend, which adds them to the isolated environment."""
    if isolated and requires:
        return frontend.command(python, project, outdir, requires)
    isolation = [] if isolated else ["--no-isolation"]
    return [python, "-m", "build", "--wheel", *isolation, "--outdir", str(outdir), str(project)]


def retag_command(python: str, wheel: Path, cell: Cell) -> list[str]:
    """Give the wheel exactly the cell's platform tag (filename, WHEEL and RECORD); the
    rewritten RECORD gets SOURCE_DATE_EPOCH's date from the environment."""
    return [
        python, "-m", "wheel", "tags", "--platform-tag", cell.platform_tag, "--remove", str(wheel)
    ]  # fmt: skip


def nvcc_toolkit(toolchain: Toolchain) -> NvccToolkit | None:
    """The CUDA_HOME a cmake or torch cell builds with, as a backend sees it (None where the
    toolchain has none): nvcc's tree, or the one made of it and the cell's CUDA libraries
    (without nvcc where PyPI has none: release.toolchain.cudahome). PyPI's nvcc keeps its
    static libraries in lib/."""
    root = cuda_home_of(toolchain)
    if root is None:
        return None
    from_pypi = toolchain.plan.device is not None
    return NvccToolkit(
        root=root,
        version=toolchain.device_version,
        library_dir=root / "lib" if from_pypi and (root / "lib").is_dir() else None,
    )


def through_compile_cache(cell: Cell, toolchain: Toolchain) -> bool:
    """Whether the cell's compiles go through sccache: its backend's say, for the device
    compiler of its toolchain."""
    return backend_for(cell.build.backend).uses_compile_cache(toolchain.plan.device_compiler)


def cell_inputs(
    cell: Cell,
    toolchain: Toolchain,
    settings: BuildSettings,
    build_dir: Path | None = None,
    *,
    through_cache: bool = True,
    arch_stop: Path | None = None,
    compile_records: Path | None = None,
) -> BuildInputs:
    """The cell's build inputs; with `through_cache`, its compiles go through sccache (the
    build here starts the cell's server), else straight to the compilers (a builder
    elsewhere). Built here, every CUDA compile goes through the tool's compile wrapper
    too, which stops the build at the first one that asks for other targets than the
    cell's and records it at `arch_stop`."""
    environment = settings.environments.get(cell.id)
    uses = through_cache and through_compile_cache(cell, toolchain)
    launcher = sccache_binary() if uses else None
    context = BuildContext(
        toolchain_env=toolchain.build_env(),
        toolkit=nvcc_toolkit(toolchain),
        tools=settings.build_tools,
        jobs=settings.compile_jobs_of(cell).jobs,
        device_cache=settings.device_cache,
        device_log=settings.device_log,
        environment=environment.paths() if environment is not None else None,
        project_dir=cell.project.path,
        build_dir=build_dir,
        compile_launcher=launcher,
        tool_python=Path(settings.python) if through_cache else None,
        arch_stop=arch_stop,
        compile_records=compile_records,
    )
    return build_inputs(cell_targets(cell), context)


def cell_environment(
    inputs: BuildInputs, *, base: Mapping[str, str], python: str, epoch: int
) -> dict[str, str]:
    """The build's environment: `base` without credentials (a build has no use for
    publishing tokens) and without RELEASE_* (csrc's inputs), the backend's inputs, its
    tools and this Python first on PATH, SOURCE_DATE_EPOCH."""
    kept = {k: v for k, v in without_credentials(base).items() if not k.startswith("RELEASE_")}
    env = with_path(kept, [*inputs.path, Path(python).parent])
    env.update(inputs.env)
    env["SOURCE_DATE_EPOCH"] = str(epoch)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def toolchain_summary(toolchain: Toolchain) -> dict[str, str]:
    source = (
        f"system toolkit {toolchain.cuda_home}"
        if toolchain.plan.device is None
        else f"PyPI {', '.join(toolchain.plan.device.requirements)}"
    )
    return {
        "device_compiler": toolchain.plan.device_compiler,
        "device_compiler_version": toolchain.device_version,
        "device_compiler_source": source,
        "host_cc": toolchain.cc_version
        if toolchain.plan.host_cc is None
        else f"zig {toolchain.cc_version}",
        "fatbin_inspector": f"cuobjdump {toolchain.inspector_version}",
    }


# ---------------------------------------------------------------- edge: the checks


def relabelled(wheel: Path, cell: Cell) -> Path:
    """The wheel with the cell's version (its local label, a nightly's dev part): rewritten
    beside the original, which is removed; the same path where the version is already the
    cell's."""
    stem_version = wheel.name.split("-")[1]
    if stem_version == str(cell.version):
        return wheel
    try:
        result = rewrite_version(wheel.name, wheel.read_bytes(), cell.version)
    except RelabelError as error:
        raise CellFailure(f"cannot give the wheel version {cell.version}: {error}") from None
    target = wheel.parent / result.filename
    target.write_bytes(result.data)
    wheel.unlink()
    return target


def checked_report(
    name: str,
    data: bytes,
    cell: Cell,
    toolchain: Toolchain,
    env: Mapping[str, str],
    *,
    python: str,
) -> WheelReport:
    report = inspected(name, data, cell, toolchain, env, python=python)
    if not report.ok:
        raise CellFailure("inspection failed: " + "; ".join(report.problems), report=report)
    return report


def certify(
    wheel: Path,
    cell: Cell,
    toolchain: Toolchain,
    *,
    python: str,
    env: Mapping[str, str],
    log: Path,
    runner: proc.Runner = proc.run,
    environment: BuildEnv | None = None,
) -> tuple[Path, WheelReport]:
    """What makes a freshly built wheel count as built: the cell's interpreter and ABI
    tags, auditwheel's verdict (with the backend's own environment's checks, where it
    built in one: release.building.torchcell), the cell's
    version (rewritten where its backend cannot set it), exactly the cell's platform tag,
    and the inspection. Raises CellFailure; returns the final wheel (beside `wheel`) and
    its report."""
    backend = backend_for(cell.build.backend)
    mistagged = tags_problem(wheel.name, cell)
    if mistagged is not None:
        raise CellFailure(mistagged)
    # A cell built in an environment of its backend's own (a torch cell's pinned torch) is
    # checked against it: its device code, the manylinux verdict without the environment's
    # libraries, the ABI check, the pin.
    verdict = manylinux_verdict(
        wheel, manylinux=cell.manylinux, arch=cell.arch, provided=backend.provided_libraries
    )
    if verdict.problems:
        raise CellFailure(
            "; ".join(
                p + backend.tag_remedy if p.startswith("auditwheel: the wheel is only") else p
                for p in verdict.problems
            )
        )
    if environment is not None:
        wheel = environment.certify(wheel, cell, log=log, python=python, env=env)
    if backend.labels_by_rewriting or cell.version.dev is not None:
        # no backend sets a nightly's dev version: every backend's wheel gets it rewritten
        wheel = relabelled(wheel, cell)
    if wheel.name != cell.wheel_filename:
        retagged = runner(retag_command(python, wheel, cell), env=env, log=log)
        wheel = wheel.parent / cell.wheel_filename
        if retagged.returncode != 0 or not wheel.is_file():
            raise CellFailure(
                proc.failure("retagging the wheel", retagged, detail=False),
                proc.tail(retagged.output),
            )
    try:
        report = checked_report(wheel.name, wheel.read_bytes(), cell, toolchain, env, python=python)
    except CellFailure as failure:
        cause = logged_cause(log, cell)
        if cause is None:
            raise
        raise CellFailure(f"{failure.error}; {cause}", failure.tail, failure.report) from None
    return wheel, report


def logged_cause(log: Path, cell: Cell) -> str | None:
    """Where the build log shows compile lines with the project's own arch flags (a build
    whose compiles the wrapper did not see): the cause and the two ways out, for the
    inspection's message."""
    hints = backend_for(cell.build.backend).arch_hints
    if hints is None:
        return None
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    stop = stop_in_log(text, cell_request(cell.sms, cell.ptx), cuda_major=cell.cuda.major)
    if stop is None:
        return None
    return (
        f"the build log shows the project's own arch flags ({stop.source} compiled with "
        f"{' '.join(stop.flags)}: {stop.asked.describe()}): {hints.cause}; set the cell's "
        f"targets to what the project builds ({matrix_targets(stop.asked)}), or {hints.honour}"
    )


Work = Callable[[], tuple[Path, WheelReport, bool, tuple[str, ...]]]


def outcome(
    cell: Cell,
    work: Work,
    *,
    start: float,
    log: Path,
    toolchain: Mapping[str, str],
    reproduce: str = "",
) -> CellResult:
    """Run a cell's `work` (returning the final wheel, its report, whether it came from
    the cache, and warnings) and turn its success or CellFailure into the cell's result."""
    try:
        wheel, report, from_cache, warnings = work()
    except CellFailure as failure:
        return CellResult(
            cell=cell,
            ok=False,
            seconds=time.monotonic() - start,
            report=failure.report,
            error=failure.error if not proc.stopped() else "stopped by a signal",
            log_tail=failure.tail,
            log=log,
            reproduce=reproduce,
            toolchain=toolchain,
        )
    return CellResult(
        cell=cell,
        ok=True,
        seconds=time.monotonic() - start,
        wheel=wheel,
        report=report,
        from_cache=from_cache,
        log=log,
        reproduce=reproduce,
        toolchain=toolchain,
        warnings=warnings,
    )


# ---------------------------------------------------------------- edge: one cell


def arch_failure(stop_record: Path, cell: Cell) -> CellFailure | None:
    """The cell's failure where its compile wrapper stopped the build (the record it wrote
    at `stop_record`), with the cause and the two ways out."""
    hints = backend_for(cell.build.backend).arch_hints
    try:
        stop = Stop.from_json(stop_record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if hints is None:
        return None
    return CellFailure(stop_message(stop, hints, remedy_problem=remedy_problem(stop, cell)))


def remedy_problem(stop: Stop, cell: Cell) -> str | None:
    """Why the matrix cannot give the cell exactly the targets the project builds."""
    if stop.asked.unknown:
        return f"{', '.join(stop.asked.unknown)} names no list of targets"
    if len(stop.asked.ptx) > 1:
        return "a cell holds one PTX target, the project's flags give " + ", ".join(
            t.compute for t in sorted(stop.asked.ptx)
        )
    ptx = min(stop.asked.ptx) if stop.asked.ptx else None
    sms = sorted(stop.asked.cubins)
    problems = [target_problem(t, cell.cuda) for t in [*sms, *([ptx] if ptx else [])]]
    problems.append(backend_for(cell.build.backend).targets_problem(sms, ptx))
    found = [p for p in problems if p is not None]
    return "; ".join(dict.fromkeys(found)) if found else None


def _one_wheel(
    command: list[str],
    env: Mapping[str, str],
    outdir: Path,
    log: Path,
    *,
    jobs: int,
    stop_record: Path | None = None,
    cell: Cell | None = None,
    compile_records: Path | None = None,
) -> Path:
    """The build's one wheel. Where its compile wrapper records a stop at `stop_record`,
    the build is ended at once (its other compiles too) and the cell fails with why; where
    it records each compile's fatbins in `compile_records`, the wheel's device code must
    be theirs."""
    stop_when = stop_record.exists if stop_record is not None else None
    built = proc.run(command, env=env, log=log, stop_when=stop_when)
    if stop_record is not None and cell is not None and stop_record.exists():
        stopped = arch_failure(stop_record, cell)
        if stopped is not None:
            raise stopped
    if built.returncode != 0:
        what = proc.failure("the PEP 517 build", built, detail=False)
        if killed_for_memory(built.output, built.returncode):
            what += f": {memory_remedy(jobs)}"
        elif (cause := failure_cause(built.output.splitlines())) is not None:
            what += f": {cause}"
        raise CellFailure(what, proc.tail(built.output))
    wheels = sorted(outdir.glob("*.whl"))
    if len(wheels) != 1:
        raise CellFailure(f"the build produced {len(wheels)} wheels, expected 1")
    if compile_records is not None:
        _held_to_compiles(wheels[0], compile_records)
    return wheels[0]


def _records_of(inputs: BuildInputs) -> Path | None:
    """Where the compile wrapper records what each compile wrote (None: the backend's
    compiles do not go through it, and its wheel is not held to them)."""
    recorded = inputs.env.get("RELEASE_COMPILE_RECORDS")
    return Path(recorded) if recorded else None


def _held_to_compiles(wheel: Path, records: Path) -> None:
    """Fail the cell where the wheel's shared objects hold device code that no compile of
    this build wrote (release.backends.compiled); a wheel that is not a zip is left to
    the inspection, which says so."""
    recorded = frozenset(path.name for path in records.iterdir()) if records.is_dir() else ()
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                (info.filename, archive.read(info))
                for info in archive.infolist()
                if is_shared_object(info.filename)
            ]
    except (zipfile.BadZipFile, OSError):
        return
    found = foreign_device_code(members, frozenset(recorded))
    problem = foreign_code_problem(found, recorded=len(recorded))
    if problem is not None:
        raise CellFailure(problem)


def _cached_wheel(
    command: list[str],
    env: Mapping[str, str],
    outdir: Path,
    log: Path,
    *,
    jobs: int,
    cache: CompileCache,
    local_dir: Path,
    environ: Mapping[str, str],
    stats: list[CacheStats],
    stop_record: Path | None = None,
    cell: Cell | None = None,
    compile_records: Path | None = None,
) -> Path:
    """`_one_wheel` with its compiles through a compile-cache server of the cell's own,
    whose hits and misses go to `stats`."""
    try:
        server = start_server(cache, local_dir=local_dir, environ=environ, log=log)
    except CompileCacheError as error:
        raise CellFailure(f"the compile cache: {error}") from None
    try:
        return _one_wheel(
            command, {**env, **server.client_env}, outdir, log, jobs=jobs,
            stop_record=stop_record, cell=cell, compile_records=compile_records,
        )  # fmt: skip
    finally:
        stats.append(server.stats())
        server.stop()


def build_cell(
    cell: Cell, toolchain: Toolchain, settings: BuildSettings, sources: str
) -> CellResult:
    """One cell from its sources (or the wheel cache) to its final wheel in settings.out."""
    start = time.monotonic()
    log = settings.log_of(cell)
    # a fixed place: the build's paths are part of each compile's cache key
    staging = settings.out / f".{cell.id}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    outdir = staging / "built"
    stop_record = staging / "arch-stop.json"
    inputs = cell_inputs(
        cell, toolchain, settings, build_dir=staging / "build", arch_stop=stop_record,
        compile_records=staging / "compiles",
    )  # fmt: skip
    compile_records = _records_of(inputs)
    stats: list[CacheStats] = []
    environment = settings.environments.get(cell.id)
    python = str(environment.python) if environment is not None else settings.python
    env = cell_environment(inputs, base=settings.environ, python=python, epoch=settings.epoch)
    command = [
        *build_command(python, settings.matrix.project.path, outdir, isolated=environment is None,
                       requires=cell.build.requires),
        *inputs.config_args(),
    ]  # fmt: skip
    identity = {**toolchain.identity, "build_tools": " ".join(settings.build_tools.versions)}
    if environment is not None:
        identity.update(environment.cache_identity())
    key = wheel_cache_key(cell, sources, identity, epoch=settings.epoch, recipe=recipe())
    cache = settings.wheel_cache

    def work() -> tuple[Path, WheelReport, bool, tuple[str, ...]]:
        lookup = cache.get(key, cell.wheel_filename)
        warnings = (lookup.damage + "; building it again",) if lookup.damage else ()
        if lookup.data is not None:
            data = lookup.data
            report = checked_report(
                cell.wheel_filename, data, cell, toolchain, env, python=settings.python
            )
        else:
            log.unlink(missing_ok=True)
            for path, text in inputs.files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            jobs = settings.compile_jobs_of(cell).jobs
            if through_compile_cache(cell, toolchain):
                wheel = _cached_wheel(
                    command, env, outdir, log, jobs=jobs, cache=settings.compile_cache,
                    local_dir=staging / "no-compile-cache"
                    if settings.compile_cache.storage == "none"
                    else settings.compile_dir_of(cell),
                    environ=settings.environ, stats=stats, stop_record=stop_record, cell=cell,
                    compile_records=compile_records,
                )  # fmt: skip
            else:
                wheel = _one_wheel(
                    command, env, outdir, log, jobs=jobs, stop_record=stop_record, cell=cell,
                    compile_records=compile_records,
                )  # fmt: skip
            candidate, report = certify(
                wheel, cell, toolchain, python=settings.python, env=env, log=log,
                environment=environment,
            )  # fmt: skip
            data = candidate.read_bytes()
            cache.put(key, cell.wheel_filename, data)
        final = settings.out / cell.wheel_filename
        write_atomic(final, data)
        near = budget_warning(report, cell)
        return final, report, lookup.data is not None, (*warnings, *([near] if near else []))

    reproduce = proc.reproduce_command(command, env, None, parent=settings.environ)
    try:
        summary = toolchain_summary(toolchain)
        if environment is not None:
            summary.update(environment.summary())
        result = outcome(cell, work, start=start, log=log, toolchain=summary, reproduce=reproduce)
        return replace(result, compile_cache=stats[0]) if stats else result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def record_cell(
    cell: Cell, wheel: Path, toolchain: Toolchain, settings: BuildSettings
) -> CellResult:
    """The checks `build_cell` makes after its PEP 517 build, on a wheel built elsewhere
    from the cell's inputs (cibuildwheel); the wheel goes to settings.out."""
    start = time.monotonic()
    log = settings.log_of(cell)
    env = {**without_credentials(settings.environ), "SOURCE_DATE_EPOCH": str(settings.epoch)}
    settings.out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cell.id}.", dir=settings.out))

    def work() -> tuple[Path, WheelReport, bool, tuple[str, ...]]:
        copy = staging / wheel.name
        shutil.copyfile(wheel, copy)
        candidate, report = certify(copy, cell, toolchain, python=settings.python, env=env, log=log)
        final = settings.out / candidate.name
        write_atomic(final, candidate.read_bytes())
        return final, report, False, ()

    try:
        return outcome(cell, work, start=start, log=log, toolchain=toolchain_summary(toolchain))
    except OSError as error:
        raise BuildError(f"{wheel}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
