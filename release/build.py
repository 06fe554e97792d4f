"""`release build`: every selected cell through the PEP 517 frontend, inspected, into dist/.

Pure core: the environment and command of a cell's build (`cell_env`, `build_command`),
the key of a finished wheel in the cache (`wheel_cache_key`), the order cells build in
(`schedule`). Edge: `build_cells` provisions toolchains, runs `python -m build` and
auditwheel through release.proc, inspects every wheel, and writes the manifest.

Device code depends on the CUDA version, not on the CPU arch: all cells share one device
cache, and the cells of one CUDA version build one after another so that the first
compiles the device code and the others find it in the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from release import proc
from release.errors import BuildError
from release.fsutil import write_atomic
from release.inspect import FatbinContents, WheelReport, inspect_wheel
from release.manifest import (
    MANIFEST_NAME,
    Manifest,
    WheelEntry,
    read_manifest,
    write_manifest,
)
from release.matrix import Cell, Matrix
from release.nccl import OverrideFile, override_files, write_override_files
from release.toolchain import Toolchain, ToolchainPlan, list_fatbin_targets, provision, resolve

SKIPPED_PARTS = frozenset({"build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache"})


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    matrix: Matrix
    cells: tuple[Cell, ...]
    out: Path
    cache_dir: Path
    cuda_home: Path | None = None
    jobs: int = 1
    fail_fast: bool = False
    python: str = sys.executable
    environ: Mapping[str, str] = field(default_factory=dict)

    @property
    def device_jobs(self) -> int:
        """Parallel device compiles per cell: the CPUs shared by the cells built at once."""
        return max(1, (os.cpu_count() or 2) // self.jobs)

    def cell_env(
        self, cell: Cell, toolchain_env: Mapping[str, str], *, base: Mapping[str, str]
    ) -> dict[str, str]:
        """`cell_env` with this build's device cache, device log and device jobs."""
        return cell_env(
            cell,
            toolchain_env,
            base=base,
            device_cache=self.cache_dir / "device",
            device_log=self.out / "logs" / "device.jsonl",
            device_jobs=self.device_jobs,
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


# ---------------------------------------------------------------- pure core


def cell_env(
    cell: Cell,
    toolchain_env: Mapping[str, str],
    *,
    base: Mapping[str, str],
    device_cache: Path,
    device_log: Path,
    device_jobs: int,
) -> dict[str, str]:
    """The environment of one cell's PEP 517 build: the build inputs of csrc/BUILDING.md."""
    env = {k: v for k, v in base.items() if not k.startswith("RELEASE_")}
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
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    return env


def build_command(python: str, project: Path, outdir: Path) -> list[str]:
    return [python, "-m", "build", "--wheel", "--outdir", str(outdir), str(project)]


def show_command(python: str, wheel: Path) -> list[str]:
    """auditwheel's verdict on a wheel; it reads the ELF files, so it works for any arch."""
    return [python, "-m", "auditwheel", "show", str(wheel)]


def retag_command(python: str, wheel: Path, cell: Cell) -> list[str]:
    """Give the wheel exactly the cell's platform tag (filename, WHEEL and RECORD)."""
    return [
        python,
        "-m",
        "wheel",
        "tags",
        "--platform-tag",
        cell.platform_tag,
        "--remove",
        str(wheel),
    ]


_SHOW_TAG = re.compile(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"')


def auditwheel_problems(output: str, cell: Cell) -> list[str]:
    """What `auditwheel show` says that makes the wheel unfit for the cell's manylinux tag."""
    match = _SHOW_TAG.search(output)
    if match is None:
        return [f"auditwheel show gave no platform tag: {proc.tail(output, 3)}"]
    tag = match.group(1)
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    wanted = tuple(int(p) for p in cell.manylinux.split("_"))
    if found is None or (int(found.group(1)), int(found.group(2))) > wanted:
        return [f"auditwheel: the wheel is only {tag}, not {cell.platform_tag}"]
    if found.group(3) != cell.arch:
        return [f"auditwheel: the wheel's libraries are {found.group(3)}, the cell is {cell.arch}"]
    if "required by the wheel:" in output:
        return [
            "auditwheel: the wheel needs shared libraries outside manylinux: "
            + proc.tail(output.rsplit("required by the wheel:", maxsplit=1)[-1], 5).replace(
                "\n", " "
            )
        ]
    return []


def source_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """A digest of a source tree given as (relative path, bytes) pairs."""
    digest = hashlib.sha256()
    for name, data in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def wheel_cache_key(cell: Cell, sources: str, toolchain: Mapping[str, str]) -> str:
    """Everything a cell's wheel depends on: sources, toolchain versions, cell settings."""
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
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


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


def project_files(project: Path) -> Iterable[tuple[str, bytes]]:
    for path in sorted(project.rglob("*")):
        relative = path.relative_to(project)
        if not path.is_file() or SKIPPED_PARTS.intersection(relative.parts):
            continue
        if relative.name.startswith(".") or path.suffix == ".pyc":
            continue
        yield relative.as_posix(), path.read_bytes()


def fatbin_lister(toolchain: Toolchain) -> Callable[[str, bytes], FatbinContents]:
    def list_targets(name: str, data: bytes) -> FatbinContents:
        with tempfile.NamedTemporaryFile(suffix=".fatbin") as handle:
            handle.write(data)
            handle.flush()
            found = list_fatbin_targets(Path(handle.name), cuobjdump=toolchain.cuobjdump)
        return FatbinContents(sms=found.sms, ptx=found.ptx)

    return list_targets


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


def provision_all(plans: Mapping[str, ToolchainPlan], python: str) -> dict[str, Toolchain]:
    """Provision each distinct plan once (the CUDA toolchain is shared by both arches)."""
    done: dict[ToolchainPlan, Toolchain] = {}
    out = {}
    for cell_id, plan in plans.items():
        if plan not in done:
            done[plan] = provision(plan, python=python)
        out[cell_id] = done[plan]
    return out


Progress = Callable[[str, Cell, CellResult | None], None]


class CellFailure(Exception):
    """A cell's wheel did not make it: what went wrong, the log tail, the inspection."""

    def __init__(self, error: str, tail: str = "", report: WheelReport | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.tail = tail
        self.report = report


def certify(
    wheel: Path,
    cell: Cell,
    toolchain: Toolchain,
    *,
    python: str,
    env: Mapping[str, str],
    log: Path,
) -> tuple[Path, WheelReport]:
    """What makes a freshly built wheel count as built: auditwheel's verdict, exactly the
    cell's platform tag, and the inspection. Raises CellFailure; returns the retagged wheel
    (beside `wheel`) and its report."""
    shown = proc.run(show_command(python, wheel), env=env, log=log)
    problems = auditwheel_problems(shown.output, cell)
    if shown.returncode != 0 or problems:
        raise CellFailure("; ".join(problems) or "auditwheel show failed", proc.tail(shown.output))
    if wheel.name != cell.wheel_filename:
        retagged = proc.run(retag_command(python, wheel, cell), env=env, log=log)
        wheel = wheel.parent / cell.wheel_filename
        if retagged.returncode != 0 or not wheel.is_file():
            raise CellFailure("retagging the wheel failed", proc.tail(retagged.output))
    return wheel, inspected(wheel, cell, toolchain)


def inspected(wheel: Path, cell: Cell, toolchain: Toolchain) -> WheelReport:
    report = inspect_wheel(
        wheel.name, wheel.read_bytes(), cell, list_fatbin=fatbin_lister(toolchain)
    )
    if not report.ok:
        raise CellFailure("inspection failed: " + "; ".join(report.problems), report=report)
    return report


def outcome(
    cell: Cell,
    work: Callable[[], tuple[Path, WheelReport, bool]],
    *,
    start: float,
    log: Path,
    toolchain: Mapping[str, str],
    reproduce: str = "",
) -> CellResult:
    """Run a cell's `work` (returning the final wheel, its report, and whether it came from
    the cache) and turn its success or CellFailure into the cell's result."""
    try:
        wheel, report, from_cache = work()
    except CellFailure as failure:
        return CellResult(
            cell=cell,
            ok=False,
            seconds=time.monotonic() - start,
            report=failure.report,
            error=failure.error,
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
    )


def build_one(
    cell: Cell,
    toolchain: Toolchain,
    settings: BuildSettings,
    sources: str,
) -> CellResult:
    start = time.monotonic()
    summary = toolchain_summary(toolchain)
    toolchain_env = toolchain.build_env()
    key = wheel_cache_key(cell, sources, summary | {"env": json.dumps(toolchain_env)})
    cached = settings.cache_dir / "wheels" / key / cell.wheel_filename
    log = settings.out / "logs" / f"{cell.id}.log"
    env = settings.cell_env(cell, toolchain_env, base=settings.environ)
    staging = Path(tempfile.mkdtemp(prefix=f".{cell.id}.", dir=settings.out))
    command = build_command(settings.python, settings.matrix.project.path, staging / "built")
    reproduce = proc.reproduce_command(command, env, None)

    def work() -> tuple[Path, WheelReport, bool]:
        if cached.is_file():
            candidate, report, from_cache = cached, inspected(cached, cell, toolchain), True
        else:
            log.unlink(missing_ok=True)
            built = proc.run(command, env=env, log=log)
            if built.returncode != 0:
                raise CellFailure("the PEP 517 build failed", proc.tail(built.output))
            wheels = sorted((staging / "built").glob("*.whl"))
            if len(wheels) != 1:
                raise CellFailure(f"the build produced {len(wheels)} wheels, expected 1")
            candidate, report = certify(
                wheels[0], cell, toolchain, python=settings.python, env=env, log=log
            )
            write_atomic(cached, candidate.read_bytes())
            from_cache = False
        final = settings.out / candidate.name
        write_atomic(final, candidate.read_bytes())
        return final, report, from_cache

    try:
        return outcome(cell, work, start=start, log=log, toolchain=summary, reproduce=reproduce)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_cells(
    settings: BuildSettings, toolchains: Mapping[str, Toolchain], progress: Progress
) -> list[CellResult]:
    settings.out.mkdir(parents=True, exist_ok=True)
    (settings.out / "logs" / "device.jsonl").unlink(missing_ok=True)
    sources = source_digest(project_files(settings.matrix.project.path))
    results: dict[str, CellResult] = {}
    stop = threading.Event()
    lock = threading.Lock()

    def run_group(group: list[Cell]) -> None:
        for cell in group:
            if stop.is_set():
                return
            progress("start", cell, None)
            result = build_one(cell, toolchains[cell.id], settings, sources)
            with lock:
                results[cell.id] = result
            progress("done", cell, result)
            if not result.ok and settings.fail_fast:
                stop.set()

    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        for future in [pool.submit(run_group, g) for g in schedule(settings.cells)]:
            future.result()
    return [results[c.id] for c in settings.cells if c.id in results]


def write_outputs(
    settings: BuildSettings, results: Sequence[CellResult]
) -> tuple[Manifest, list[OverrideFile]]:
    """The manifest (merged with one already in `out`) and NCCL files of the built majors."""
    built = [r for r in results if r.ok and r.report is not None]
    project = settings.matrix.project
    files = override_files(settings.matrix.nccl_pins([r.cell for r in built]))
    write_override_files(files, settings.out)
    manifest = Manifest(
        project=project.name,
        version=str(project.version),
        wheels=tuple(
            manifest_entry(r.cell, r.report, r.toolchain) for r in built if r.report is not None
        ),
        nccl_files=tuple(f.name for f in files),
    )
    path = settings.out / MANIFEST_NAME
    if path.is_file():
        previous = read_manifest(path)
        if (previous.project, previous.version) == (manifest.project, manifest.version):
            kept = tuple(w for w in previous.wheels if (settings.out / w.filename).is_file())
            manifest = Manifest(
                project=previous.project,
                version=previous.version,
                wheels=kept,
                nccl_files=previous.nccl_files,
            ).merged(manifest)
    write_manifest(manifest, path)
    return manifest, files


def require_success(results: Sequence[CellResult], total: int) -> None:
    failed = [r for r in results if not r.ok]
    if failed or len(results) < total:
        names = ", ".join(r.cell.id for r in failed) or "none"
        raise BuildError(
            f"{len(failed)} of {total} cells failed ({names}); {total - len(results)} not started",
            hint="each failure above shows its log tail and the command that reproduces it",
        )
