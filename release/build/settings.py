"""What a build is given and what it gives back: `BuildSettings` (the cells, where wheels
go, the caches, jobs, the environment, the timestamp), one cell's `CellResult`, and the
`CellFailure` a cell's pipeline raises. SOURCE_DATE_EPOCH dates every wheel's files
(`source_date_epoch`: the environment's, else the project's last commit, else 1980).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from release import proc
from release.backends import BuildTools
from release.build.cache import WheelCache
from release.build.compilecache import CacheStats
from release.build.jobs import CompileJobs, compile_jobs
from release.credentials import without_credentials
from release.errors import ConfigError
from release.inspection.wheel import WheelReport
from release.matrix import Cell, Matrix
from release.matrix.compilecache import CompileCache
from release.toolchain.cacheroot import toolchain_cache
from release.toolchain.torchenv import TorchEnv

DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest date a zip file can hold


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
    torch_envs: Mapping[str, TorchEnv] = field(default_factory=dict)  # torch cells, by id
    compile_jobs: int | None = None  # --compile-jobs: over the matrix's and the machine's
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory: int | None = None  # bytes available to the build; None: not known
    compile_cache: CompileCache = field(default_factory=CompileCache)  # matrix's or command's

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
    def compile_root(self) -> Path:
        """Where the cells' local compile-cache directories are."""
        return self.compile_cache.dir or (self.work_dir or self.cache_dir) / "compile"

    def compile_dir_of(self, cell: Cell) -> Path:
        """The cell's local compile-cache directory (one sccache server at a time each)."""
        return self.compile_root / cell.id

    def log_of(self, cell: Cell) -> Path:
        return self.out / "logs" / f"{cell.id}.log"


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
