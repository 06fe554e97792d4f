"""What a build is given and what it gives back: `BuildSettings` (the cells, where wheels
go, the caches, jobs, the environment, the timestamp), one cell's `CellResult`, and the
`CellFailure` a cell's pipeline raises.

Every setting that more than one place can give is layered once, here (`layered`): the
command line over the environment over matrix.yaml over this machine, each value with the
place it came from (`Sourced`), which `release doctor` and `build --dry-run` print.
SOURCE_DATE_EPOCH dates every wheel's files (`source_date_epoch`: the environment's, else
a recorded build's, else the project's last commit, else 1980).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from release import proc
from release.backends import BuildTools, EnvironmentPaths
from release.building.cache import WheelCache
from release.building.compilecache import CacheStats
from release.building.jobs import CompileJobs, compile_jobs
from release.credentials import without_credentials
from release.defaults import COMPILE_CACHE_VARIABLE
from release.errors import ConfigError, FileError, path_as_given, shown
from release.fsutil import output_dir_problem
from release.inspection.torchcuda import TorchIndexes
from release.inspection.wheel import WheelReport
from release.matrix import Cell, Matrix
from release.matrix.compilecache import CompileCache, parse_compile_cache
from release.toolchain.cacheroot import cache_root, toolchain_cache

DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest date a zip file can hold

T = TypeVar("T")


class BuildEnv(Protocol):
    """A provisioned build environment of a backend's own (a torch cell's pinned torch in a
    venv): what the build stage runs in it and records of it, and the checks a wheel built
    in it must pass besides every wheel's (`certify`), so that the pipeline asks the
    environment and never what kind of cell it has."""

    @property
    def python(self) -> Path:
        """The interpreter the cell's PEP 517 build runs, without isolation."""
        ...

    @property
    def cuda_home(self) -> Path: ...

    @property
    def site_packages(self) -> Path | None:
        """Where what it provides lies, for the GPU gate's test venv."""
        ...

    @property
    def name(self) -> str:
        """What it holds, in a message: `torch 2.14.1+cu130`."""
        ...

    @property
    def identity(self) -> str:
        """What it holds and where, for the build's notes."""
        ...

    def paths(self) -> EnvironmentPaths: ...

    def cache_identity(self) -> dict[str, str]: ...

    def summary(self) -> dict[str, str]: ...

    def certify(
        self, wheel: Path, cell: Cell, *, log: Path, python: str, env: Mapping[str, str]
    ) -> Path:
        """The wheel checked against the environment it was built in, and its METADATA
        made to require what the environment holds (rewritten in place). Raises
        CellFailure."""
        ...


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A setting's value and where it came from (`--cache-dir`, `$CUDA_HOME`, `matrix.yaml`,
    `this machine`, `default`)."""

    value: T
    source: str


@dataclass(frozen=True, kw_only=True)
class GivenOptions:
    """What the command line gives of the layered settings; None: not given."""

    cache_dir: Path | None = None
    cuda_home: Path | None = None
    compile_cache: CompileCache | None = None
    compile_jobs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What this machine gives: the home directory (the default cache), its CPUs and the
    memory left to this process (None: not known)."""

    home: Path
    cpus: int
    memory: int | None


SETTING_COLUMNS = ("setting", "value", "from")  # a row of Layered.rows, on the terminal
SETTING_KEYS = ("setting", "value", "source")  # and in a --json document


@dataclass(frozen=True, kw_only=True)
class Layered:
    """The layered settings of one command, each with its source."""

    cache_dir: Sourced[Path]
    cuda_home: Sourced[Path | None]
    compile_cache: Sourced[CompileCache]
    compile_jobs: Sourced[int | None]  # None: each cell's, from matrix.yaml or this machine
    epoch: Sourced[int]
    machine: Machine

    def rows(self) -> tuple[tuple[str, str, str], ...]:
        """(setting, value, source) for doctor and the dry run."""
        jobs = self.compile_jobs.value
        home = self.cuda_home.value
        return (
            ("cache dir", str(self.cache_dir.value), self.cache_dir.source),
            ("CUDA_HOME", str(home) if home else "none: PyPI's toolchains", self.cuda_home.source),
            ("compile cache", self.compile_cache.value.describe(), self.compile_cache.source),
            (
                "compile jobs",
                str(jobs) if jobs is not None else "each cell's, from its CPUs and memory",
                self.compile_jobs.source,
            ),
            ("SOURCE_DATE_EPOCH", str(self.epoch.value), self.epoch.source),
        )


def first_of(layers: tuple[tuple[str, T | None], ...], default: Sourced[T]) -> Sourced[T]:
    """The first layer that gives a value (its source named), else `default`."""
    for source, value in layers:
        if value is not None:
            return Sourced(value, source)
    return default


def layered(
    given: GivenOptions,
    environ: Mapping[str, str],
    matrix: Matrix,
    machine: Machine,
    *,
    epoch: Sourced[int],
) -> Layered:
    """The command line over the environment over matrix.yaml over this machine, once for
    every setting that more than one of them can give. A value in the environment that is
    not one is a ConfigError naming the variable."""
    cache_dir, cuda_home = toolchain_paths(given, environ, machine)
    matrix_cache = Sourced(
        matrix.compile_cache,
        "default"
        if matrix.compile_cache == CompileCache()
        else f"{matrix.path.name} compile-cache",
    )
    compile_cache = first_of(
        (
            ("--compile-cache", given.compile_cache),
            (f"${COMPILE_CACHE_VARIABLE}", _compile_cache_of(environ)),
        ),
        matrix_cache,
    )
    compile_jobs = first_of(
        (("--compile-jobs", given.compile_jobs),),
        Sourced[int | None](None, f"{matrix.path.name} build.compile-jobs, else this machine"),
    )
    return Layered(
        cache_dir=cache_dir,
        cuda_home=cuda_home,
        compile_cache=compile_cache,
        compile_jobs=compile_jobs,
        epoch=epoch,
        machine=machine,
    )


def toolchain_paths(
    given: GivenOptions, environ: Mapping[str, str], machine: Machine
) -> tuple[Sourced[Path], Sourced[Path | None]]:
    """The cache dir (resolved) and CUDA_HOME (None: PyPI's toolchains), each with its
    source: the command line, else the environment, else the default."""
    root, root_source = cache_root(environ, machine.home)
    cache_dir = first_of((("--cache-dir", given.cache_dir),), Sourced(root, root_source))
    home = environ.get("CUDA_HOME")
    cuda_home = first_of(
        (("--cuda-home", given.cuda_home), ("$CUDA_HOME", Path(home) if home else None)),
        Sourced[Path | None](None, "default"),
    )
    resolved = cache_dir.value.resolve()
    temporary = Path(environ["TMPDIR"]) if environ.get("TMPDIR") else None
    for source, path in (
        (cache_dir.source, cache_dir.value),
        (cache_dir.source, resolved),  # a link to a directory whose name is odd
        (cuda_home.source, cuda_home.value),
        ("$TMPDIR", temporary),
    ):
        odd = _odd_in_path(path)
        if odd is not None:
            raise ConfigError(
                [f"{source}: {shown(str(path))} holds {odd}"],
                hint="the build tools that read the path (CMake) cut or split it there: name "
                "another",
            )
    if cache_dir.source.startswith("$") and (problem := output_dir_problem(cache_dir.value)):
        # the variable is held to what --cache-dir is (OutputDir), a dry run included
        raise FileError(
            f"{cache_dir.source} {path_as_given(str(cache_dir.value))}: {problem}",
            hint="give a directory, or a path where one can be created",
        )
    return Sourced(resolved, cache_dir.source), cuda_home


def _odd_in_path(path: Path | None) -> str | None:
    """What in a path the build's tools cannot take: a control character (CMake cuts the
    path at a line break) or a `;` (CMake's list separator)."""
    text = str(path) if path is not None else ""
    if not text.isprintable():
        return "a control character"
    return "a ';', CMake's list separator" if ";" in text else None


def _compile_cache_of(environ: Mapping[str, str]) -> CompileCache | None:
    value = environ.get(COMPILE_CACHE_VARIABLE, "").strip()
    if not value:
        return None
    try:
        return parse_compile_cache(value)
    except ValueError as error:
        raise ConfigError(
            [f"{COMPILE_CACHE_VARIABLE}: {error}"],
            hint=f"unset {COMPILE_CACHE_VARIABLE} to use matrix.yaml's compile-cache",
        ) from None


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
    # the build environments of their own that cells' backends ask for, by cell id
    environments: Mapping[str, BuildEnv] = field(default_factory=dict)
    compile_jobs: int | None = None  # --compile-jobs: over the matrix's and the machine's
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory: int | None = None  # bytes available to the build; None: not known
    compile_cache: CompileCache = field(default_factory=CompileCache)  # matrix's or command's
    sources: tuple[tuple[str, str, str], ...] = ()  # (setting, value, source): Layered.rows
    # the torch indexes a stable-ABI cell reads (which torch, its requirement), once a run
    torch_indexes: TorchIndexes = field(default_factory=TorchIndexes, compare=False, repr=False)

    def compile_jobs_of(self, cell: Cell) -> CompileJobs:
        """Compiles the cell's build runs at once, and why that many."""
        return compile_jobs(
            cpus=self.cpus,
            memory=self.memory,
            side_by_side=self.jobs,
            override=self.compile_jobs or cell.build.compile_jobs,
        )

    @property
    def toolchain_dir(self) -> Path:
        return toolchain_cache(self.cache_dir)

    @property
    def device_cache(self) -> Path:
        return (self.work_dir or self.cache_dir) / "device"

    @property
    def wheel_cache(self) -> WheelCache:
        return WheelCache((self.work_dir or self.cache_dir) / "wheels")

    @property
    def device_log(self) -> Path:
        return self.out / "logs" / "device.jsonl"

    @property
    def runtime_dir(self) -> Path:
        """Where an isolated build's wheel gets its runtime dependencies installed, to look
        up the libraries they provide (release.building.runtimedeps)."""
        return (self.work_dir or self.cache_dir) / "runtime"

    @property
    def compile_root(self) -> Path:
        """Where the cells' local compile-cache directories are."""
        return self.compile_cache.dir or (self.work_dir or self.cache_dir) / "compile"

    def compile_dir_of(self, cell: Cell) -> Path:
        """The cell's local compile-cache directory (one sccache server at a time each)."""
        return self.compile_root / cell.id

    def log_of(self, cell: Cell) -> Path:
        return self.out / "logs" / f"{cell.id}.log"


@dataclass(frozen=True, kw_only=True)
class CopiedWheel:
    """The cell's wheel relabelled for one of its other copies (matrix.yaml's list of
    destinations): `cell` as that copy publishes it, and the report of the built wheel with
    this file's name, size and sha256."""

    cell: Cell
    report: WheelReport


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
    compile_cache: CacheStats | None = None  # None: no compile ran (the wheel cache)
    copies: tuple[CopiedWheel, ...] = ()  # the wheel relabelled for its other copies
    # stopped by a signal: its log then ends in what its children did about that (a Python
    # program's KeyboardInterrupt traceback), which the report leaves unshown
    stopped: bool = False


class CellFailure(Exception):
    """A cell's wheel did not make it: what went wrong, the log tail, the inspection."""

    def __init__(self, error: str, tail: str = "", report: WheelReport | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.tail = tail
        self.report = report


def parse_epoch(text: str) -> int:
    """SOURCE_DATE_EPOCH as the integer seconds it must be; ConfigError otherwise."""
    if not re.fullmatch(r"[0-9]{1,12}", text.strip()):
        raise ConfigError(
            [f"SOURCE_DATE_EPOCH={text[:20]!r} is not a whole number of seconds since 1970"],
            hint="unset it, or set it to e.g. $(git log -1 --format=%ct)",
        )
    return max(int(text), DEFAULT_EPOCH)


def source_date_epoch(
    environ: Mapping[str, str],
    project: Path,
    runner: proc.Runner,
    *,
    recorded: Sourced[int | None] | None = None,
) -> Sourced[int]:
    """SOURCE_DATE_EPOCH, else the timestamp a recorded build used (`recorded`: the
    manifest a comparison rebuilds, or that the GPU gate's wheels come from), else the time
    of the project's last commit (HEAD: the same in a shallow clone as in a full one), else
    1980-01-01 where there is no git."""
    given = environ.get("SOURCE_DATE_EPOCH")
    if given is not None and given.strip():
        return Sourced(parse_epoch(given), "$SOURCE_DATE_EPOCH")
    if recorded is not None and recorded.value is not None:
        return Sourced(recorded.value, recorded.source)
    done = runner(
        ["git", "-C", str(project), "log", "-1", "--format=%ct"],
        env=without_credentials(environ),
        separate_stderr=True,
    )
    text = done.output.strip()
    if done.returncode == 0 and text.isdigit():
        return Sourced(parse_epoch(text), "the time of the last commit")
    return Sourced(DEFAULT_EPOCH, "default: no git history")
