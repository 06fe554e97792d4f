"""The one road of a cell, whatever its backend: its build inputs (the backend's, from
release.backends) and environment, the PEP 517 build in a staging folder, exactly one
wheel, auditwheel's verdict, the cell's local label (rewritten where the backend cannot
set it) and exact platform tag, the inspection, and the wheel cache. `build_cell` is
`release build`'s and the GPU gate's; `record_cell` takes a wheel built elsewhere
(`release env --record`) through the same checks.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
from release.backends.compiled import held_to_compiles
from release.building.archstop import arch_failure, logged_cause
from release.building.cache import WheelCache, recipe, wheel_cache_key
from release.building.compilecache import (
    CacheStats,
    CompileCacheError,
    sccache_binary,
    start_server,
)
from release.building.diagnose import failure_cause
from release.building.jobs import killed_for_memory, memory_remedy
from release.building.preparestep import (
    maybe_prepared,
    reproduce_line,
    sources_dir,
    step_of,
    writing_dist,
)
from release.building.relabel import RelabelError, as_platlib, copies_of, rewrite_version
from release.building.runtimedeps import libraries_verdict
from release.building.settings import BuildEnv, BuildSettings, CellFailure, CellResult, CopiedWheel
from release.building.torchcell import tags_problem
from release.credentials import without_credentials
from release.errors import BuildError
from release.fsutil import write_atomic
from release.inspection.devicecode import is_shared_object
from release.inspection.verdict import inspected
from release.inspection.wheel import WheelReport, budget_warning
from release.matrix import Cell
from release.toolchain import Toolchain, frontend
from release.toolchain.buildenv import cell_targets, cuda_home_of
from release.wheelfile import WheelName

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
    """Give the wheel exactly the cell's platform tag (filename, WHEEL and RECORD), and its
    Python tag where the build gave another of the same ABI (a py39-none wheel of a
    python: any cell is py3-none); the rewritten RECORD gets SOURCE_DATE_EPOCH's date from
    the environment."""
    built = WheelName.parse(wheel.name).tags
    python_tag = (
        ["--python-tag", cell.python_tag]
        if {t.interpreter for t in built} != {cell.python_tag}
        else []
    )
    return [
        python, "-m", "wheel", "tags", *python_tag, "--platform-tag", cell.platform_tag,
        "--remove", str(wheel),
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
        has_nvcc=toolchain.plan.device_compiler == "nvcc",
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
        project_dir=sources_dir(settings.matrix, cell),
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
    if WheelName.parse(wheel.name).version == cell.version:
        return wheel
    try:
        result = rewrite_version(wheel.name, wheel.read_bytes(), cell.version)
    except RelabelError as error:
        raise CellFailure(f"cannot give the wheel version {cell.version}: {error}") from None
    target = wheel.parent / result.filename
    target.write_bytes(result.data)
    wheel.unlink()
    return target


def relabelled_copies(cell: Cell, wheel: Path, report: WheelReport) -> tuple[CopiedWheel, ...]:
    """The cell's final wheel relabelled for each of its other copies (`copies_of`),
    written beside it, each with the built wheel's report under its own name and sha256."""
    try:
        copies = copies_of(cell, wheel.name, wheel.read_bytes() if cell.relabelled else b"")
    except RelabelError as error:
        raise CellFailure(f"cannot relabel the wheel for a copy: {error}", report=report) from None
    for _, result in copies:
        write_atomic(wheel.parent / result.filename, result.data)
    return tuple(
        CopiedWheel(
            cell=seen, report=replace(report, filename=r.filename, size=r.size, sha256=r.sha256)
        )
        for seen, r in copies
    )


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


def _cached(
    cache: WheelCache,
    key: str,
    cell: Cell,
    toolchain: Toolchain,
    env: Mapping[str, str],
    *,
    python: str,
) -> tuple[tuple[bytes, WheelReport] | None, tuple[str, ...]]:
    """The cell's wheel from the cache and its report, inspected as a built one is, and
    what was wrong with the entry: a damaged one, or one the inspection refuses (another
    cell's wheel under this key), is removed and built again."""
    lookup = cache.get(key, cell.wheel_filename)
    if lookup.damage is not None:
        return None, (lookup.damage + "; building it again",)
    if lookup.data is None:
        return None, ()
    try:
        report = checked_report(
            cell.wheel_filename, lookup.data, cell, toolchain, env, python=python
        )
    except CellFailure as failure:
        cache.discard(key)
        where = cache.entry(key) / cell.wheel_filename
        why = "; ".join(failure.report.problems) if failure.report else failure.error
        return None, (f"the cached wheel {where} fails its inspection ({why}); building it again",)
    return (lookup.data, report), ()


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
    scratch_root: Path | None = None,
) -> tuple[Path, WheelReport]:
    """What makes a freshly built wheel count as built: the cell's interpreter and ABI
    tags, the backend's own environment's checks where it built in one
    (release.building.torchcell), auditwheel's verdict with the libraries of the wheel's
    runtime dependencies left out (`libraries_verdict`: looked up in that environment,
    else in a scratch site under `scratch_root`), the cell's version (rewritten where its
    backend cannot set it), exactly the cell's platform tag (a pure wheel that holds a
    shared object marked a platform wheel: `platlib`), and the inspection. Raises
    CellFailure; returns the final wheel (beside `wheel`) and its report."""
    backend = backend_for(cell.build.backend)
    mistagged = tags_problem(wheel.name, cell)
    if mistagged is not None:
        raise CellFailure(mistagged)
    # A cell built in an environment of its backend's own (a torch cell's pinned torch) is
    # checked against it: its device code, the ABI check, the pin.
    if environment is not None:
        wheel = environment.certify(wheel, cell, log=log, python=python, env=env)
    verdict = libraries_verdict(
        wheel, cell, environment=environment, scratch_root=scratch_root,
        python=python, env=env, log=log, runner=runner,
    )  # fmt: skip
    if verdict.problems:
        raise CellFailure(
            "; ".join(
                p + backend.tag_remedy if p.startswith("auditwheel: the wheel is only") else p
                for p in verdict.problems
            )
        )
    if backend.labels_by_rewriting or cell.version.dev is not None:
        # no backend sets a nightly's dev version: every backend's wheel gets it rewritten
        wheel = relabelled(wheel, cell)
    if wheel.name.endswith("-any.whl"):
        wheel = platlib(wheel)
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


def platlib(wheel: Path) -> Path:
    """A pure wheel that holds a shared object (a library the project built outside its
    build backend and ships as package data) made the platform wheel its cell's tag says
    it is (release.building.relabel.as_platlib), in place; any other wheel as it is."""
    data = wheel.read_bytes()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            native = any(is_shared_object(name) for name in archive.namelist())
        rewritten = as_platlib(data) if native else data
    except (zipfile.BadZipFile, RelabelError):
        return wheel  # the inspection says what is wrong with it
    if rewritten != data:
        wheel.write_bytes(rewritten)
    return wheel


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
        copies = relabelled_copies(cell, wheel, report)
    except CellFailure as failure:
        stopped = proc.stopped()
        return CellResult(
            cell=cell,
            ok=False,
            seconds=time.monotonic() - start,
            report=failure.report,
            error=failure.error if not stopped else "stopped by a signal",
            log_tail=failure.tail if not stopped else "",
            stopped=stopped,
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
        copies=copies,
    )


# ---------------------------------------------------------------- edge: one cell


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
    problem = held_to_compiles(wheels[0], compile_records) if compile_records else None
    if problem is not None:
        raise CellFailure(problem)
    return wheels[0]


def _records_of(inputs: BuildInputs) -> Path | None:
    """Where the compile wrapper records what each compile wrote (None: the backend's
    compiles do not go through it, and its wheel is not held to them)."""
    recorded = inputs.env.get("RELEASE_COMPILE_RECORDS")
    return Path(recorded) if recorded else None


def write_files(files: Mapping[Path, str]) -> None:
    """The files a backend's build reads, each in its place; a text that starts with `#!`
    executable (a script the build runs: the cmake cell's nvcc)."""
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if text.startswith("#!"):
            path.chmod(0o755)


@contextmanager
def _compiles_through(
    cell: Cell,
    toolchain: Toolchain,
    settings: BuildSettings,
    *,
    staging: Path,
    log: Path,
    stats: list[CacheStats],
) -> Iterator[dict[str, str]]:
    """A compile-cache server of the cell's own for as long as the cell compiles (its
    prepare step and its PEP 517 build alike: a compile with no server to find would start
    one of its own, uncounted, on no storage of the matrix's, and leave it running), where
    its compiles go through one; gives the compiles' client environment (none without), and
    its hits and misses go to `stats`."""
    if not through_compile_cache(cell, toolchain):
        yield {}
        return
    cache = settings.compile_cache
    local_dir = (
        staging / "no-compile-cache" if cache.storage == "none" else settings.compile_dir_of(cell)
    )
    try:
        server = start_server(cache, local_dir=local_dir, environ=settings.environ, log=log)
    except CompileCacheError as error:
        raise CellFailure(f"the compile cache: {error}") from None
    try:
        yield server.client_env
    finally:
        stats.append(server.stats())
        server.stop()


def _own_tmpdir() -> tempfile.TemporaryDirectory[str]:
    """The TMPDIR of a cell's build (its prepare step too), removed with the cell: what a
    compiler ended by a signal leaves there (cicc's `*.lgenfe.bc`) goes with it, never into
    the user's. Not in the reproduce line, which runs with the user's."""
    return tempfile.TemporaryDirectory(prefix="release-build-", ignore_cleanup_errors=True)


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
    own = (settings.out, settings.cache_dir, settings.work_dir)
    step = step_of(settings.matrix, cell, own=own, dist=settings.out)
    built = step.build_dir if step is not None else settings.matrix.project.path
    command = [
        *build_command(python, built, outdir, isolated=environment is None,
                       requires=cell.build.requires),
        *inputs.config_args(),
    ]  # fmt: skip
    identity = {**toolchain.identity, "build_tools": " ".join(settings.build_tools.versions)}
    if environment is not None:
        identity.update(environment.cache_identity())
    key = wheel_cache_key(cell, sources, identity, epoch=settings.epoch, recipe=recipe())
    cache = settings.wheel_cache

    def work() -> tuple[Path, WheelReport, bool, tuple[str, ...]]:
        found, warnings = _cached(cache, key, cell, toolchain, env, python=settings.python)
        if found is not None:
            data, report = found
        else:
            log.unlink(missing_ok=True)
            write_files(inputs.files)
            server = _compiles_through(
                cell, toolchain, settings, staging=staging, log=log, stats=stats
            )
            with server as client_env, _own_tmpdir() as tmpdir:
                compiling = {**env, **client_env, "TMPDIR": tmpdir}
                with maybe_prepared(step, str(cell.version), env=compiling, log=log):
                    wheel = _one_wheel(
                        command, compiling, outdir, log,
                        jobs=settings.compile_jobs_of(cell).jobs, stop_record=stop_record,
                        cell=cell, compile_records=compile_records,
                    )  # fmt: skip
            candidate, report = certify(
                wheel, cell, toolchain, python=settings.python, env=env, log=log,
                environment=environment, scratch_root=settings.runtime_dir,
            )  # fmt: skip
            data = candidate.read_bytes()
            cache.put(key, cell.wheel_filename, data)
        final = settings.out / cell.wheel_filename
        with writing_dist(step):
            write_atomic(final, data)
        near = budget_warning(report, cell)
        return final, report, found is not None, (*warnings, *([near] if near else []))

    reproduce = reproduce_line(step, str(cell.version), command, env, parent=settings.environ)
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
        candidate, report = certify(
            copy, cell, toolchain, python=settings.python, env=env, log=log,
            scratch_root=settings.runtime_dir,
        )  # fmt: skip
        final = settings.out / candidate.name
        write_atomic(final, candidate.read_bytes())
        return final, report, False, ()

    try:
        return outcome(cell, work, start=start, log=log, toolchain=toolchain_summary(toolchain))
    except OSError as error:
        raise BuildError(f"{wheel}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
