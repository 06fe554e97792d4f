"""How many compiles a cell's build runs at once (MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL,
NVCC_THREADS, csrc's RELEASE_JOBS): the CPUs and the memory available, shared by the cells
built side by side, at MEMORY_PER_JOB a compile; `--compile-jobs` or the matrix's
`build.compile-jobs` overrides it. And how a compile killed for memory reads in a log.

The pure core chooses and reads logs; the edge reads /proc/meminfo and the cgroup limit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30
# nvcc on a translation unit of torch's or CUTLASS's headers peaks at 2-3 GiB (cicc and
# cudafe++ beside the host compiler); one compile per core runs a runner out of memory.
MEMORY_PER_JOB = 3 * GIB

# What gcc's driver, nvcc, sccache and a shell say when the kernel's OOM killer took a
# child, and the exit of a process killed by SIGKILL.
_KILLED = re.compile(
    r"Killed signal terminated program|died due to signal 9|\(Kill signal\)|"
    r"terminated \(signal: 9\)|Compiler killed by signal 9|"
    r"^\S*: line \d+: +\d+ Killed ",
    re.MULTILINE,
)
SIGKILL_EXITS = frozenset({137, -9})


@dataclass(frozen=True)
class CompileJobs:
    jobs: int
    reason: str  # how the number was chosen, for the build log


def compile_jobs(
    *, cpus: int, memory: int | None, side_by_side: int, override: int | None = None
) -> CompileJobs:
    """Compiles a cell runs at once, with why: the override, else the smaller of its share
    of the CPUs and of the memory available (`memory` bytes, None where unknown)."""
    if override is not None:
        return CompileJobs(override, f"{override} as asked (--compile-jobs or build.compile-jobs)")
    by_cpu = max(1, cpus // side_by_side)
    if memory is None:
        return CompileJobs(by_cpu, f"{cpus} CPUs / {side_by_side} cells at once (memory unknown)")
    by_memory = max(1, memory // (MEMORY_PER_JOB * side_by_side))
    jobs = min(by_cpu, by_memory)
    return CompileJobs(
        jobs,
        f"{cpus} CPUs and {memory / GIB:.1f} GiB available / {side_by_side} cells at once, "
        f"{MEMORY_PER_JOB // GIB} GiB a compile",
    )


def killed_for_memory(output: str, returncode: int) -> bool:
    """Whether a build's output or exit says a process was killed (the OOM killer's SIGKILL)
    rather than that a compiler found an error."""
    return returncode in SIGKILL_EXITS or _KILLED.search(output) is not None


def memory_remedy(jobs: int) -> str:
    fewer = max(1, jobs // 2)
    return (
        f"a compile was killed, most likely for memory ({jobs} compiles at once): run fewer, "
        f"e.g. `release build --compile-jobs {fewer}` or `build: {{compile-jobs: {fewer}}}` "
        "in matrix.yaml"
    )


def meminfo_available(text: str) -> int | None:
    """MemAvailable of /proc/meminfo, in bytes."""
    found = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


def cgroup_room(limit: str, used: str) -> int | None:
    """What a cgroup memory limit leaves (v2's `memory.max` and `memory.current`, v1's
    `memory.limit_in_bytes` and `memory.usage_in_bytes`); None for v2's `max` (no limit;
    v1 says no limit with a number larger than any machine's memory)."""
    limit, used = limit.strip(), used.strip()
    if not limit.isdigit() or not used.isdigit():
        return None
    return max(0, int(limit) - int(used))


# ---------------------------------------------------------------- edge


def cgroup_memory_files(cgroup: str) -> list[tuple[str, str]]:
    """Where the memory limit and use of this process's cgroup are, from /proc/self/cgroup:
    v2's `memory.max` / `memory.current` (the `0::` line), v1's `memory.limit_in_bytes` /
    `memory.usage_in_bytes` under the memory controller's mount (a line naming `memory`),
    each at the cgroup's path and at the mount's root (where a cgroup namespace shows the
    container's own cgroup as `/`)."""
    found: list[tuple[str, str]] = []
    for line in cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, place = parts
        if controllers == "":
            base, files = "sys/fs/cgroup", ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = "sys/fs/cgroup/memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for where in dict.fromkeys((f"{base}{place}".rstrip("/"), base)):
            found.append((f"{where}/{files[0]}", f"{where}/{files[1]}"))
    return found


def available_memory(root: Path = Path("/")) -> int | None:
    """Memory this process can still use: MemAvailable, or less where its cgroup (a
    container's limit, v1 or v2) leaves less."""

    def read(path: str) -> str | None:
        try:
            return (root / path).read_text(encoding="utf-8")
        except OSError:
            return None

    found = [meminfo_available(read("proc/meminfo") or "")]
    for limit_file, used_file in cgroup_memory_files(read("proc/self/cgroup") or ""):
        limit, used = read(limit_file), read(used_file)
        if limit is not None and used is not None:
            found.append(cgroup_room(limit, used))  # every limit that applies: the least
    known = [m for m in found if m is not None]
    return min(known) if known else None


def cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
