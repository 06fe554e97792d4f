"""How many compiles a cell runs at once (CPUs and memory, shared by the cells built side
by side, or as asked), and a compile killed for memory told from a compiler error."""

from __future__ import annotations

from pathlib import Path

from release.building.jobs import (
    GIB,
    MEMORY_PER_JOB,
    available_memory,
    cgroup_memory_files,
    cgroup_room,
    compile_jobs,
    killed_for_memory,
    meminfo_available,
    memory_remedy,
)


def test_memory_bounds_the_jobs_where_it_is_scarcer_than_cpus() -> None:
    chosen = compile_jobs(cpus=64, memory=24 * GIB, side_by_side=1)
    assert chosen.jobs == 24 * GIB // MEMORY_PER_JOB == 8
    assert "64 CPUs and 24.0 GiB available" in chosen.reason
    assert compile_jobs(cpus=2, memory=24 * GIB, side_by_side=1).jobs == 2
    # two CUDA versions side by side share both
    assert compile_jobs(cpus=64, memory=24 * GIB, side_by_side=2).jobs == 4
    assert compile_jobs(cpus=16, memory=None, side_by_side=2).jobs == 8


def test_never_fewer_than_one_and_an_override_wins() -> None:
    assert compile_jobs(cpus=1, memory=GIB, side_by_side=4).jobs == 1
    asked = compile_jobs(cpus=64, memory=GIB, side_by_side=1, override=12)
    assert asked.jobs == 12
    assert "as asked" in asked.reason


OOM_LINES = [
    "g++: fatal error: Killed signal terminated program cc1plus",
    "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
    "/bin/sh: line 1:  4242 Killed                  nvcc -c big.cu -o big.o",
    # nvcc behind sccache, in a memory cgroup past its limit (benchmarks/compile_cache.py)
    "cudafe++ terminated (signal: 9)sccache: Compiler killed by signal 9",
]


def test_a_killed_compile_is_told_from_a_compiler_error() -> None:
    for line in OOM_LINES:
        assert killed_for_memory(f"[3/9] c++ ...\n{line}\nninja: build stopped\n", 1), line
    assert killed_for_memory("", 137)
    error = 'ops.cu(12): error: identifier "Killed" is undefined\nKilled\n'
    assert not killed_for_memory(error, 1)
    assert "--compile-jobs 4" in memory_remedy(8)
    assert "compile-jobs: 1" in memory_remedy(1)


def test_meminfo_and_the_cgroup_limit() -> None:
    assert meminfo_available("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2 * 1024 * 1024
    assert meminfo_available("MemTotal: 100 kB\n") is None
    assert cgroup_room("max\n", "12345\n") is None
    assert cgroup_room(f"{8 * GIB}\n", f"{3 * GIB}\n") == 5 * GIB


def test_a_containers_limit_is_what_is_left(tmp_path: Path) -> None:
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(f"MemAvailable: {64 * 1024 * 1024} kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/job/runner\n")
    assert available_memory(tmp_path) == 64 * GIB  # no cgroup files: the machine's
    group = tmp_path / "sys" / "fs" / "cgroup" / "job" / "runner"
    group.mkdir(parents=True)
    (group / "memory.max").write_text(f"{16 * GIB}\n")
    (group / "memory.current").write_text(f"{4 * GIB}\n")
    assert available_memory(tmp_path) == 12 * GIB
    assert available_memory(tmp_path / "nowhere") is None


def test_a_cgroup_v1_limit_counts_too(tmp_path: Path) -> None:
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(f"MemAvailable: {64 * 1024 * 1024} kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text(
        "9:name=systemd:/\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"
    )
    group = tmp_path / "sys" / "fs" / "cgroup" / "memory" / "docker" / "abc"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text(f"{8 * GIB}\n")
    (group / "memory.usage_in_bytes").write_text(f"{2 * GIB}\n")
    assert available_memory(tmp_path) == 6 * GIB
    # no limit: v1 writes a number past any machine's memory, so MemAvailable decides
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert available_memory(tmp_path) == 64 * GIB


def test_a_cgroup_namespace_shows_the_containers_own_cgroup_at_the_mounts_root(
    tmp_path: Path,
) -> None:
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(f"MemAvailable: {64 * 1024 * 1024} kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text("4:memory:/\n")
    mount = tmp_path / "sys" / "fs" / "cgroup" / "memory"
    mount.mkdir(parents=True)
    (mount / "memory.limit_in_bytes").write_text(f"{4 * GIB}\n")
    (mount / "memory.usage_in_bytes").write_text(f"{1 * GIB}\n")
    assert available_memory(tmp_path) == 3 * GIB
    assert cgroup_memory_files("0::/a/b\n") == [
        ("sys/fs/cgroup/a/b/memory.max", "sys/fs/cgroup/a/b/memory.current"),
        ("sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory.current"),
    ]
