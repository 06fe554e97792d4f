"""The torch environments in the toolchain cache (4.6-5.4 GB each) kept within a size
budget: every process that uses one holds a shared lock on its `<name>.use` file until it
exits (`hold`), whose modification time says when it was last used; pruning (`prune`) takes
that lock exclusively without waiting before it deletes an environment, so one in use is
never deleted, and goes from the least recently used. The budget is
$RELEASE_TORCH_ENV_BUDGET (`16GiB`, `500MB`, a number of bytes, or `none` for no limit),
else 16 GiB. The sizes of the cache's parts, for `release doctor`, are measured here too.

The pure core parses the budget and picks what to prune; the edge locks, measures and
deletes.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from release.errors import ConfigError

BUDGET_VARIABLE = "RELEASE_TORCH_ENV_BUDGET"
DEFAULT_BUDGET = 16 * 2**30
ENVIRONMENT_GLOB = "torch-*"  # release.backends.torch_extension.TorchEnvSpec.dirname

_UNITS = {
    "": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)

# ---------------------------------------------------------------- pure core


def parse_size(text: str) -> int | None:
    """A size in bytes (`16GiB`, `500MB`, `1.5G`, `1000000`); None for `none`/`unlimited`.
    ValueError for anything else."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    match = _SIZE.match(text)
    if match is None or match[2].lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size (write e.g. 16GiB, 500MB, or none)")
    size = float(match[1]) * _UNITS[match[2].lower()]
    if not math.isfinite(size) or size > 2**63:  # 400 nines: past any disk, and past int()
        raise ValueError(f"{text[:40]!r} is not a size (write e.g. 16GiB, 500MB, or none)")
    return int(size)


def shown_size(size: int) -> str:
    """`5.1 GiB`: binary units, as the default budget is written."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            shown = f"{value:.0f}" if unit == "B" else f"{value:.1f}".removesuffix(".0")
            return f"{shown} {unit}"
        value /= 1024
    return f"{value:.1f}".removesuffix(".0") + " TiB"


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How much the torch environments may hold (None: no limit), and where that comes from."""

    size: int | None
    source: str

    def describe(self) -> str:
        return "no limit" if self.size is None else shown_size(self.size)


def budget_of(environ: Mapping[str, str]) -> Budget:
    """$RELEASE_TORCH_ENV_BUDGET, else the default; a value that is not a size is a
    ConfigError naming the variable."""
    given = environ.get(BUDGET_VARIABLE, "").strip()
    if not given:
        return Budget(size=DEFAULT_BUDGET, source="default")
    try:
        return Budget(size=parse_size(given), source=f"${BUDGET_VARIABLE}")
    except ValueError as error:
        raise ConfigError(
            [f"{BUDGET_VARIABLE}: {error}"],
            hint=f"unset {BUDGET_VARIABLE} for the default budget of {shown_size(DEFAULT_BUDGET)}",
        ) from None


@dataclass(frozen=True, kw_only=True)
class Environment:
    """A torch environment in the cache: its directory, its size on disk, when it was last
    used (seconds since 1970; 0: never marked)."""

    path: Path
    size: int
    last_used: float


def pruning_order(environments: Sequence[Environment]) -> list[Environment]:
    """The order pruning goes in: least recently used first (never marked: first of all)."""
    return sorted(environments, key=lambda e: (e.last_used, e.path.name))


# ---------------------------------------------------------------- edge

# The use locks this process holds: kept open (and so held) until it exits.
_HELD: dict[Path, int] = {}


def use_file(cache_dir: Path, name: str) -> Path:
    return cache_dir / f"{name}.use"


def hold(cache_dir: Path, name: str) -> None:
    """Mark the environment `name` in use by this process until it exits, and used now;
    waits while a prune deletes it (the caller then makes it again)."""
    path = use_file(cache_dir, name)
    if path in _HELD:
        os.utime(path)
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(handle, fcntl.LOCK_SH)
    os.utime(path)
    _HELD[path] = handle


def size_of(path: Path) -> int:
    """Bytes on disk under `path`, symlinks not followed (0 where it is gone)."""
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total


def environments(cache_dir: Path) -> list[Environment]:
    """The torch environments in the toolchain cache `cache_dir`."""
    out = []
    for path in sorted(cache_dir.glob(ENVIRONMENT_GLOB)):
        if not path.is_dir():
            continue
        try:
            used = use_file(cache_dir, path.name).stat().st_mtime
        except OSError:
            used = 0.0
        out.append(Environment(path=path, size=size_of(path), last_used=used))
    return out


@contextmanager
def _unused(cache_dir: Path, name: str) -> Iterator[bool]:
    """True while this holds the environment's use lock exclusively (no process uses it),
    False where a process holds it."""
    handle = os.open(use_file(cache_dir, name), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(handle)


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """What a prune did: the environments it deleted, those it would have deleted but a
    process uses, and what the environments hold after it."""

    deleted: tuple[Environment, ...]
    in_use: tuple[Environment, ...]
    remaining: int


def prune(cache_dir: Path, budget: int | None) -> Pruned:
    """Delete torch environments, least recently used first, until the rest fit `budget`;
    never one a process holds (`hold`)."""
    found = environments(cache_dir)
    remaining = sum(e.size for e in found)
    deleted: list[Environment] = []
    in_use: list[Environment] = []
    for environment in pruning_order(found):
        if budget is None or remaining <= budget:
            break
        with _unused(cache_dir, environment.path.name) as unused:
            if not unused:
                in_use.append(environment)
                continue
            # gone from its name at once, then deleted
            aside = environment.path.with_name(f".{environment.path.name}.pruned")
            shutil.rmtree(aside, ignore_errors=True)
            try:
                environment.path.rename(aside)
            except OSError:  # gone already, or not ours to move: left as it is
                continue
            shutil.rmtree(aside, ignore_errors=True)
        deleted.append(environment)
        remaining -= environment.size
    return Pruned(deleted=tuple(deleted), in_use=tuple(in_use), remaining=remaining)
