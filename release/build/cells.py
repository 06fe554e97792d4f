"""`release build`: every selected cell through the PEP 517 frontend, inspected, into dist/.

Pure core: the environment of a cell's build (`cell_env`; its command is
release.inspection.certify's `build_command`), the key of a finished wheel in the cache
(`wheel_cache_key`: sources, toolchain identity, cell, timestamp; never a path), the order
cells build in (`schedule`), and what the manifest in dist/ holds after a build
(`reconcile`). Edge: `build_cells` runs `python -m build` and auditwheel through
release.proc, inspects every wheel, and `write_outputs` writes dist/.

A cell whose matrix `build.backend` is `cmake` or `torch` is built by the project's own
build system through release.build.project (its inputs from release.backends.recipe), with the
same cache, log, inspection and manifest.

Device code depends on the CUDA version, not on the CPU arch: all cells share one device
cache, and the cells of one CUDA version build one after another so that the first
compiles the device code and the others find it in the cache.

Every wheel is reproducible: the build gets SOURCE_DATE_EPOCH (from the environment, else
the time of the project's last commit, else 1980-01-01), and everything it reads back
from a cache is checked against the sha256 stored with it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from release import __version__, proc
from release.backends.recipe import BuildTools
from release.build import project as projectbuild
from release.build.cache import WheelCache
from release.credentials import without_credentials
from release.downstream.nccl import override_files, write_override_files
from release.errors import BuildError, ConfigError
from release.fsutil import sha256_file, write_atomic
from release.inspection.certify import (
    DEFAULT_EPOCH,
    CellFailure,
    build_command,
    certify,
    fatbin_lister,
    inspected,
)
from release.inspection.devicecode import elf_lister
from release.inspection.wheel import WheelReport
from release.matrix import Cell, Matrix
from release.records.dist import Reconciled, reconcile
from release.records.manifest import (
    MANIFEST_NAME,
    Manifest,
    WheelEntry,
    read_manifest,
    write_manifest,
)
from release.toolchain import Progress as ToolchainProgress
from release.toolchain import Toolchain, ToolchainPlan, provision, resolve

SKIPPED_PARTS = frozenset({"build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache"})


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    matrix: Matrix
    cells: tuple[Cell, ...]
    out: Path
    cache_dir: Path  # toolchains/ lives here
    work_dir: Path | None = None  # device/ and wheels/ (default: cache_dir)
    cuda_home: Path | None = None
    jobs: int = 1
    fail_fast: bool = False
    python: str = sys.executable
    environ: Mapping[str, str] = field(default_factory=dict)
    epoch: int = DEFAULT_EPOCH
    build_tools: BuildTools = field(default_factory=BuildTools)  # cmake, ninja (PyPI)

    @property
    def device_jobs(self) -> int:
        """Parallel device compiles per cell: the CPUs shared by the cells built at once."""
        return max(1, (os.cpu_count() or 2) // self.jobs)

    @property
    def device_cache(self) -> Path:
        return (self.work_dir or self.cache_dir) / "device"

    @property
    def wheel_cache(self) -> WheelCache:
        return WheelCache((self.work_dir or self.cache_dir) / "wheels")

    @property
    def device_log(self) -> Path:
        return self.out / "logs" / "device.jsonl"

    def cell_env(
        self, cell: Cell, toolchain_env: Mapping[str, str], *, base: Mapping[str, str]
    ) -> dict[str, str]:
        """`cell_env` with this build's device cache, device log, jobs and timestamp."""
        return cell_env(
            cell,
            toolchain_env,
            base=base,
            device_cache=self.device_cache,
            device_log=self.device_log,
            device_jobs=self.device_jobs,
            epoch=self.epoch,
        )


@dataclass(frozen=True, kw_only=True)
class CellResult:
    cell: Cell
    ok: bool
    seconds: float
    wheel: Path | None = None
    report: WheelReport | None = None
    from_cache: bool = False
    error: str | None = None
    log_tail: str = ""
    log: Path | None = None
    reproduce: str = ""
    toolchain: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------- pure core


def cell_env(
    cell: Cell,
    toolchain_env: Mapping[str, str],
    *,
    base: Mapping[str, str],
    device_cache: Path,
    device_log: Path,
    device_jobs: int,
    epoch: int = DEFAULT_EPOCH,
) -> dict[str, str]:
    """The environment of one cell's PEP 517 build: the build inputs of csrc/BUILDING.md,
    over `base` without credentials (a build has no use for publishing tokens)."""
    env = {k: v for k, v in without_credentials(base).items() if not k.startswith("RELEASE_")}
    tools = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([tools, *filter(None, [base.get("PATH")])])
    env.update(toolchain_env)
    env.update(
        {
            "RELEASE_SMS": ";".join(str(s) for s in cell.sms),
            "RELEASE_PTX": str(cell.ptx) if cell.ptx else "",
            "RELEASE_TARGET_ARCH": cell.arch,
            "RELEASE_LOCAL_LABEL": cell.local_label or "",
            "RELEASE_CUDA_VERSION": str(cell.cuda),
            "RELEASE_DEVICE_CACHE": str(device_cache),
            "RELEASE_DEVICE_LOG": str(device_log),
            "RELEASE_JOBS": str(device_jobs),
            "SOURCE_DATE_EPOCH": str(epoch),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    return env


def parse_epoch(text: str) -> int:
    """SOURCE_DATE_EPOCH as the integer seconds it must be; ConfigError otherwise."""
    if not re.fullmatch(r"[0-9]{1,12}", text.strip()):
        raise ConfigError(
            [f"SOURCE_DATE_EPOCH={text[:20]!r} is not a whole number of seconds since 1970"],
            hint="unset it, or set it to e.g. $(git log -1 --format=%ct)",
        )
    return max(int(text), DEFAULT_EPOCH)


def source_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """A digest of a source tree given as (relative path, bytes) pairs."""
    digest = hashlib.sha256()
    for name, data in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def recipe() -> dict[str, str]:
    """What turns a build into the final bytes besides sources and compilers: this tool,
    the retagging `wheel`, and the zlib that compresses the zip members."""
    return {
        "release": __version__,
        "wheel": importlib.metadata.version("wheel"),
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
    }


def wheel_cache_key(
    cell: Cell,
    sources: str,
    toolchain: Mapping[str, str],
    *,
    epoch: int,
    recipe: Mapping[str, str],
) -> str:
    """Everything a cell's wheel depends on and nothing else: sources, the toolchain's
    identity (versions, not paths), the cell's settings, the timestamp, the recipe."""
    blob = json.dumps(
        {
            "sources": sources,
            "toolchain": dict(sorted(toolchain.items())),
            "cuda": str(cell.cuda),
            "arch": cell.arch,
            "sms": [str(s) for s in cell.sms],
            "ptx": str(cell.ptx) if cell.ptx else None,
            "label": cell.local_label,
            "plat": cell.platform_tag,
            "epoch": epoch,
            "recipe": dict(sorted(recipe.items())),
            # csrc's own backend adds nothing here, so its keys do not depend on `build:`
            **(
                {"build": [cell.build.backend, cell.build.env, cell.build.config_settings]}
                if cell.build.backend != "release"
                else {}
            ),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def schedule(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Cells grouped by CUDA version, in matrix order: groups may run side by side, the
    cells of one group one after another (they share device code)."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(str(cell.cuda), []).append(cell)
    return list(groups.values())


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


def manifest_entry(cell: Cell, report: WheelReport, toolchain: Mapping[str, str]) -> WheelEntry:
    return WheelEntry.of(
        cell,
        filename=report.filename,
        size=report.size,
        sha256=report.sha256,
        sms=report.sms,
        ptx=report.ptx[0] if report.ptx else None,
        toolchain=toolchain,
    )


# ---------------------------------------------------------------- edge


def source_date_epoch(environ: Mapping[str, str], project: Path, runner: proc.Runner) -> int:
    """SOURCE_DATE_EPOCH, else the time of the project's last commit (HEAD: the same in a
    shallow clone as in a full one), else 1980-01-01 where there is no git."""
    given = environ.get("SOURCE_DATE_EPOCH")
    if given is not None and given.strip():
        return parse_epoch(given)
    done = runner(
        ["git", "-C", str(project), "log", "-1", "--format=%ct"],
        env=without_credentials(environ),
        separate_stderr=True,
    )
    text = done.output.strip()
    return parse_epoch(text) if done.returncode == 0 and text.isdigit() else DEFAULT_EPOCH


def project_files(project: Path) -> Iterable[tuple[str, bytes]]:
    for path in sorted(project.rglob("*")):
        relative = path.relative_to(project)
        if not path.is_file() or SKIPPED_PARTS.intersection(relative.parts):
            continue
        if relative.name.startswith(".") or path.suffix == ".pyc":
            continue
        yield relative.as_posix(), path.read_bytes()


def plan_toolchains(settings: BuildSettings) -> dict[str, ToolchainPlan]:
    return {
        cell.id: resolve(
            str(cell.cuda),
            cell.arch,
            cuda_home=settings.cuda_home,
            cache_dir=settings.cache_dir / "toolchains",
        )
        for cell in settings.cells
    }


def provision_all(
    plans: Mapping[str, ToolchainPlan],
    python: str,
    env: Mapping[str, str],
    progress: ToolchainProgress | None = None,
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


Progress = Callable[[str, Cell, CellResult | None], None]


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


def project_build(
    cell: Cell, toolchain: Toolchain, settings: BuildSettings
) -> projectbuild.ProjectBuild:
    """What this build's settings give a cmake or torch cell's project build."""
    env = without_credentials(settings.environ)
    return projectbuild.ProjectBuild(
        recipe=cell.build,
        toolchain=toolchain,
        tools=settings.build_tools,
        python=settings.python,
        environ=settings.environ,
        epoch=settings.epoch,
        jobs=settings.device_jobs,
        list_fatbin=fatbin_lister(toolchain, env),
        list_elf=elf_lister(toolchain.cuobjdump, env),
    )


def build_one(
    cell: Cell,
    toolchain: Toolchain,
    settings: BuildSettings,
    sources: str,
) -> CellResult:
    start = time.monotonic()
    summary = toolchain_summary(toolchain)
    identity = dict(toolchain.identity)
    log = settings.out / "logs" / f"{cell.id}.log"
    staging = Path(tempfile.mkdtemp(prefix=f".{cell.id}.", dir=settings.out))
    command = build_command(settings.python, settings.matrix.project.path, staging / "built")
    project = None
    if cell.build.backend == "release":
        env = settings.cell_env(cell, toolchain.build_env(), base=settings.environ)
    else:
        project = project_build(cell, toolchain, settings)
        inputs = projectbuild.cell_inputs(cell, project)
        env = projectbuild.cell_environment(inputs, project)
        command += inputs.config_args()
        identity["build_tools"] = " ".join(settings.build_tools.versions)
    key = wheel_cache_key(cell, sources, identity, epoch=settings.epoch, recipe=recipe())
    cache = settings.wheel_cache
    reproduce = proc.reproduce_command(command, env, None, parent=settings.environ)

    def work() -> tuple[Path, WheelReport, bool, tuple[str, ...]]:
        lookup = cache.get(key, cell.wheel_filename)
        warnings = (lookup.damage + "; building it again",) if lookup.damage else ()
        if lookup.data is not None:
            data = lookup.data
            report = inspected(cell.wheel_filename, data, cell, toolchain, env)
        elif project is not None:
            log.unlink(missing_ok=True)
            candidate, report = projectbuild.build_cell(cell, project, workdir=staging, log=log)
            data = candidate.read_bytes()
            cache.put(key, cell.wheel_filename, data)
        else:
            log.unlink(missing_ok=True)
            built = proc.run(command, env=env, log=log)
            if built.returncode != 0:
                raise CellFailure(
                    proc.failure("the PEP 517 build", built, detail=False),
                    proc.tail(built.output),
                )
            wheels = sorted((staging / "built").glob("*.whl"))
            if len(wheels) != 1:
                raise CellFailure(f"the build produced {len(wheels)} wheels, expected 1")
            candidate, report = certify(
                wheels[0], cell, toolchain, python=settings.python, env=env, log=log
            )
            data = candidate.read_bytes()
            cache.put(key, cell.wheel_filename, data)
        final = settings.out / cell.wheel_filename
        write_atomic(final, data)
        return final, report, lookup.data is not None, warnings

    try:
        return outcome(cell, work, start=start, log=log, toolchain=summary, reproduce=reproduce)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_cells(
    settings: BuildSettings,
    toolchains: Mapping[str, Toolchain],
    progress: Progress,
    results: dict[str, CellResult],
) -> None:
    """Build every cell into `results` (by cell id). On SIGINT/SIGTERM (KeyboardInterrupt)
    every child process is ended, the cells in flight finish as failures within about a
    second, their staging folders are removed, and the interrupt propagates; `results`
    then holds what finished, for the caller to record."""
    settings.out.mkdir(parents=True, exist_ok=True)
    settings.device_log.unlink(missing_ok=True)
    sources = source_digest(project_files(settings.matrix.project.path))
    stop = threading.Event()
    lock = threading.Lock()

    def run_group(group: list[Cell]) -> None:
        for cell in group:
            if stop.is_set() or proc.stopped():
                return
            progress("start", cell, None)
            result = build_one(cell, toolchains[cell.id], settings, sources)
            with lock:
                results[cell.id] = result
            progress("done", cell, result)
            if not result.ok and settings.fail_fast:
                stop.set()

    pool = ThreadPoolExecutor(max_workers=max(1, settings.jobs))
    futures: list[Future[None]] = [pool.submit(run_group, g) for g in schedule(settings.cells)]
    try:
        for future in futures:
            future.result()
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
            record = json.loads(line)
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
        manifest_entry(r.cell, r.report, r.toolchain)
        for r in results
        if r.ok and r.report is not None
    ]
    path = settings.out / MANIFEST_NAME
    previous = read_manifest(path) if path.is_file() else None
    project = settings.matrix.project

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
        cells={c.id: c for c in settings.matrix.cells},
        intact=intact,
        epoch=settings.epoch,
    )
    cells = {c.id: c for c in settings.matrix.cells}
    files = override_files(
        settings.matrix.nccl_pins([cells[w.cell] for w in outcome.manifest.wheels])
    )
    write_override_files(files, settings.out)
    write_manifest(
        Manifest(
            project=outcome.manifest.project,
            version=outcome.manifest.version,
            wheels=outcome.manifest.wheels,
            nccl_files=tuple(f.name for f in files),
            source_date_epoch=outcome.manifest.source_date_epoch,
        ),
        path,
    )
    return outcome


def require_success(results: Sequence[CellResult], total: int) -> None:
    failed = [r for r in results if not r.ok]
    if failed or len(results) < total:
        names = ", ".join(r.cell.id for r in failed) or "none"
        raise BuildError(
            f"{len(failed)} of {total} cells failed ({names}); {total - len(results)} not started",
            hint="each failure above shows its log tail and the command that reproduces it",
        )
