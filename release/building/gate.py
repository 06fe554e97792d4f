"""The GPU gate: the project's GPU test command, on a runner with a GPU, against each wheel
of dist/ as built and against a PTX-only build of it for its lowest SM (so the code path of
the oldest GPU runs on the runner's newer one), before anything is published.

The wheels come from dist/ after `load_dist` checked them against the manifest; the PTX-only
wheels are built here by the build stage, from the same sources and toolchains (and, for a
cmake or torch cell, the same build tools). A torch cell's "PTX-only" build keeps the
lowest SM's cubin beside its PTX (TORCH_CUDA_ARCH_LIST has no PTX-only entry); on a runner
whose GPU is of a newer major, that cubin cannot load and the PTX runs.

A torch cell's command runs in a fresh venv where its wheel lies beside exactly one torch
(a torch environment, reached through a .pth file, never copied): `python` and `pip` on PATH
are that venv's, so the project's own tests import the installed wheel and that torch. Which
torch (release.building.gatetorch): a regular wheel's pinned torch, the environment its
build used; a stable-ABI wheel's oldest and newest admitted torch, each a run of its own,
installed from the cell's torch index into an environment provisioned as a build's.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from release import proc
from release.backends import targets_problem, with_path
from release.building.events import BuildEvents
from release.building.gatetorch import AdmittedReader, Beside, GateStep, plan_steps
from release.building.settings import BuildEnv, BuildSettings, CellResult
from release.building.stage import prepare, run_build
from release.errors import shown
from release.matrix import Cell, GateRun, GpuGate, GpuRunner
from release.records.manifest import Manifest
from release.toolchain.buildenv import environment_of
from release.wheelfile import WHEEL_NAME_CHARACTERS, wheel_name_or_none


@dataclass(frozen=True, kw_only=True)
class GateResult:
    run: GateRun
    ok: bool
    seconds: float
    wheel: str
    command: str
    detail: str = ""  # why it failed: the build's error or the last lines of the tests
    output: str = ""
    beside: Beside | None = None  # the torch a torch cell's wheel ran beside

    @property
    def name(self) -> str:
        return GateStep(run=self.run, beside=self.beside).name


Started = Callable[[GateStep], None]


def _wheel_of(
    run: GateRun, ptx: Mapping[str, CellResult], built: Mapping[str, Path], dist: Path
) -> Path | GateResult:
    """The wheel a run tests, or its failed result when there is none to test."""
    if run.build == "cubin":
        if run.cell.id in built:
            return built[run.cell.id]
        detail = f"{dist} holds no wheel of {run.cell.id}: build it first"
        return GateResult(
            run=run, ok=False, seconds=0.0, wheel=run.cell.wheel_filename, command="", detail=detail
        )
    result = ptx.get(run.cell.id)
    if result is not None and result.ok and result.wheel is not None:
        return result.wheel
    return GateResult(
        run=run,
        ok=False,
        seconds=0.0,
        wheel=run.built_cell.wheel_filename,
        command="",
        detail=f"the PTX-only build failed: {result.error if result else 'not built'}",
        output=result.log_tail if result else "",
    )


def wheels_for(runs: Sequence[GateRun], manifest: Manifest, dist: Path) -> dict[str, Path]:
    """The dist/ wheel of each cell the runs test, by cell id (checked by `load_dist`): the
    one its build made, of a cell published to several places. A manifest entry whose
    name is not its cell's wheel (another arch, project or version; a rebuild's build tag
    and a copy's local label aside) is not taken: the manifest is another job's output."""
    cells = {run.cell.id: run.cell for run in runs}
    entries: dict[str, str] = {}
    for entry in manifest.wheels:
        cell = cells.get(entry.cell)
        if cell is None or not _names_a_wheel_of(entry.filename, cell):
            continue
        if entry.cell not in entries or entry.filename == cell.wheel_filename:
            entries[entry.cell] = entry.filename
    return {run.cell.id: dist / entries[run.cell.id] for run in runs if run.cell.id in entries}


def _names_a_wheel_of(filename: str, cell: Cell) -> bool:
    name, own = wheel_name_or_none(filename), cell.wheel_name
    return (
        name is not None
        and name.unversioned == own.unversioned
        and name.version.public == own.version.public
    )


def build_ptx_only(runs: Sequence[GateRun], settings: BuildSettings) -> dict[str, CellResult]:
    """The PTX-only wheels of `runs` (those with build == "ptx"), by cell id."""
    results: dict[str, CellResult] = {}
    cells = []
    for cell in (run.built_cell for run in runs if run.build == "ptx"):
        problem = targets_problem(cell.build.backend, cell.sms, cell.ptx, cell.build.targets_env)
        if problem is None:
            cells.append(cell)
        else:
            results[cell.id] = CellResult(cell=cell, ok=False, seconds=0.0, error=problem)
    if not cells:
        return results
    run = run_build(replace(settings, cells=tuple(cells)), BuildEvents())
    results.update({result.cell.id: result for result in run.results})
    return results


def environments_for(steps: Sequence[GateStep], settings: BuildSettings) -> dict[str, BuildEnv]:
    """The build environment of each cell the steps test whose backend builds in one of its
    own (a torch cell's torch, the one each step runs beside), by cell id: provisioned as
    its build would, so found in the cache where the build ran here."""
    tested = {step.cell.id: step.cell for step in steps if step.problem is None}.values()
    cells = tuple(cell for cell in tested if environment_of(cell) is not None)
    if not cells:
        return {}
    prepared, _ = prepare(replace(settings, cells=cells), BuildEvents())
    return dict(prepared.environments)


def beside_its_environment(
    wheel: Path, environment: BuildEnv, where: Path, environ: Mapping[str, str]
) -> dict[str, str] | str:
    """The environment of the command for a cell built in an environment of its own: a
    fresh venv (with pip) whose site holds the wheel, installed without dependencies, and
    sees the cell's build environment (its pinned torch) through a .pth file; `pip check`
    proves the wheel's requirements accept what that holds. Returns why not where it
    cannot be made."""
    venv = where / "venv"
    python = str(venv / "bin" / "python")
    made = proc.run([str(environment.python), "-m", "venv", str(venv)], env=environ)
    if not made.ok:
        return proc.failure("making the test venv", made)
    sites = sorted((venv / "lib").glob("python*/site-packages"))
    if not sites or environment.site_packages is None:
        return "making the test venv: the venv or the build environment has no site-packages"
    (sites[0] / "release-pinned-torch.pth").write_text(
        f"{environment.site_packages}\n", encoding="utf-8"
    )
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    if list(sites[0].glob("setuptools-*.dist-info")):
        # the venv's own setuptools (ensurepip's, before Python 3.12) would shadow the one
        # the build environment holds (torch asks for a newer one)
        dropped = proc.run([*pip, "uninstall", "--yes", "--quiet", "setuptools"], env=environ)
        if not dropped.ok:
            return proc.failure("making the test venv", dropped)
    installed = proc.run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                         env=environ)  # fmt: skip
    if not installed.ok:
        return proc.failure(f"installing {wheel.name}", installed)
    checked = proc.run([*pip, "check"], env=environ)
    if not checked.ok:
        return proc.failure(f"pip check of {wheel.name} beside {environment.name}", checked)
    return {**with_path(environ, [venv / "bin"]), "VIRTUAL_ENV": str(venv)}


def gate_plan(
    gate: GpuGate,
    runner: GpuRunner,
    cells: Sequence[Cell],
    *,
    manifest: Manifest,
    dist: Path,
    read_index: AdmittedReader | None = None,
) -> list[GateStep]:
    """What the gate runs on `runner`: each run of its cells, once per torch a torch cell's
    wheel is tested beside (release.building.gatetorch); a run whose code a GPU of the
    runner's cannot run is one that cannot be made."""
    runs = gate.runs(runner, cells)
    steps = plan_steps(runs, wheels_for(runs, manifest, dist), read_index)
    return [
        replace(step, problem=problem)
        if step.problem is None and (problem := step.run.unrunnable_on(runner))
        else step
        for step in steps
    ]


def run_gate(
    gate: GpuGate,
    steps: Sequence[GateStep],
    *,
    manifest: Manifest,
    dist: Path,
    settings: BuildSettings,
    environ: Mapping[str, str],
    cwd: Path,
    started: Started,
) -> list[GateResult]:
    """Run the gate's command once per step of `gate_plan`; every step, even after a
    failure, so the report shows the whole picture."""
    runs = tuple(dict.fromkeys(step.run for step in steps))
    built = wheels_for(runs, manifest, dist)
    results = []
    with tempfile.TemporaryDirectory(prefix="release-gpu-gate-") as tmp:
        makeable = tuple(dict.fromkeys(step.run for step in steps if step.problem is None))
        ptx = build_ptx_only(makeable, replace(settings, out=Path(tmp)))
        environments = environments_for(steps, settings)
        for number, step in enumerate(steps):
            started(step)
            found = _wheel_of(step.run, ptx, built, dist)
            environment = environments.get(step.cell.id)
            where = Path(tmp) / f"run-{number}"
            results.append(
                _run_step(gate, step, found, environment, where=where, environ=environ, cwd=cwd)
            )
    return results


_PLAIN = WHEEL_NAME_CHARACTERS | {"/"}  # a path of such names


def _plain_path(wheel: Path, where: Path) -> Path | str:
    """`wheel`, or a link to it in the run's own directory where its path holds a character
    a shell reads (`--dist 'd$(x)'`): a command may hand {wheel} to `sh -c`. Why neither
    is plain, where the run's directory is not (TMPDIR holds such a character)."""
    if _is_plain(wheel):
        return wheel
    link = where / "wheel" / wheel.name  # a wheel's name holds none (WheelName)
    if not _is_plain(link):
        return (
            f"the wheel's path {shown(str(wheel))} and the gate's scratch directory "
            f"{shown(str(where))} hold a character a shell reads, which the command could "
            "run: set --dist and TMPDIR to plain paths"
        )
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(wheel.resolve())
    return link


def _is_plain(path: Path) -> bool:
    return all(c in _PLAIN for c in str(path))


def _run_step(
    gate: GpuGate,
    step: GateStep,
    found: Path | GateResult,
    environment: BuildEnv | None,
    *,
    where: Path,
    environ: Mapping[str, str],
    cwd: Path,
) -> GateResult:
    """One step: the command on the wheel `found` (or its failed result), in the venv that
    holds it beside `environment` where the cell builds in one of its own."""
    run, start = step.run, time.monotonic()
    if isinstance(found, GateResult):
        return replace(found, beside=step.beside)
    wheel = found
    given = _plain_path(wheel, where)
    problem = step.problem or (given if isinstance(given, str) else None)
    words = gate.command_line(
        replace(run, cell=step.cell), wheel if isinstance(given, str) else given
    )
    env: Mapping[str, str] | str = problem or environ
    if problem is None and environment is not None:
        env = beside_its_environment(wheel, environment, where, environ)
    if isinstance(env, str):
        return GateResult(
            run=run, ok=False, seconds=time.monotonic() - start, wheel=wheel.name,
            command=shlex.join(words), detail=env, beside=step.beside,
        )  # fmt: skip
    done = proc.run(words, env=env, cwd=cwd)
    return GateResult(
        run=run,
        ok=done.ok,
        seconds=time.monotonic() - start,
        wheel=wheel.name,
        command=shlex.join(words),
        detail="" if done.ok else f"exit {done.returncode}: {proc.one_line_tail(done.output)}",
        output=done.output,
        beside=step.beside,
    )
