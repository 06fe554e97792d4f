"""The one road from a command line to the settings of a build (build, env, gpu-gate) and
of the commands that read the toolchains (doctor, plan): the options typed once, the
precedence of every layered setting written once (release/building/settings.py: the command
line, the environment, matrix.yaml, this machine), each value with its source. A command
imports it when it runs, never for its `--help` (it stands on the build stage's settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from release import proc
from release.building.jobs import available_memory, cpus
from release.building.settings import (
    BuildSettings,
    GivenOptions,
    Layered,
    Machine,
    Sourced,
    layered,
    source_date_epoch,
    toolchain_paths,
)
from release.matrix import Cell, Matrix


def this_machine() -> Machine:
    """The home directory, CPUs and memory of the machine this command runs on."""
    return Machine(home=Path.home(), cpus=cpus(), memory=available_memory())


def toolchain_dirs(given: GivenOptions, environ: Mapping[str, str]) -> tuple[Path, Path | None]:
    """The cache dir and CUDA_HOME (None: PyPI's toolchains) of a command that only reads
    the toolchains (plan, doctor)."""
    cache, home = toolchain_paths(given, environ, this_machine())
    return cache.value, home.value


@dataclass(frozen=True, kw_only=True)
class BuildOptions(GivenOptions):
    """What a command line says about building: the layered settings it gives (None: not
    given) and the build's own."""

    jobs: int = 1
    fail_fast: bool = False


def layered_from(
    given: GivenOptions,
    matrix: Matrix,
    environ: Mapping[str, str],
    *,
    recorded: Sourced[int | None] | None = None,
) -> Layered:
    """Every layered setting of this command, with its source (build/settings.py writes
    the precedence once: the command line, the environment, matrix.yaml, this machine)."""
    epoch = source_date_epoch(environ, matrix.project.path, proc.run, recorded=recorded)
    return layered(given, environ, matrix, this_machine(), epoch=epoch)


def settings_from(
    options: BuildOptions,
    matrix: Matrix,
    environ: Mapping[str, str],
    *,
    cells: tuple[Cell, ...],
    out: Path,
    recorded: Sourced[int | None] | None = None,
) -> BuildSettings:
    """The one way a command's options become the BuildSettings of its cells."""
    settings = layered_from(options, matrix, environ, recorded=recorded)
    return BuildSettings(
        matrix=matrix,
        cells=cells,
        out=out,
        cache_dir=settings.cache_dir.value,
        cuda_home=settings.cuda_home.value,
        jobs=options.jobs,
        fail_fast=options.fail_fast,
        environ=environ,
        epoch=settings.epoch.value,
        compile_cache=settings.compile_cache.value,
        compile_jobs=settings.compile_jobs.value,
        cpus=settings.machine.cpus,
        memory=settings.machine.memory,
        sources=settings.rows(),
    )
