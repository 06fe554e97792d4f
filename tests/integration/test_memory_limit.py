"""The memory a build may use, read inside a real cgroup with a memory limit (v1 or v2,
whichever this machine mounts), as in a container: the compile jobs follow the limit, not
the machine's memory."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.building.jobs import GIB, MEMORY_PER_JOB, compile_jobs

REPO = Path(__file__).resolve().parents[2]
LIMIT = 2 * GIB


def _own_group() -> tuple[Path, str, str] | None:
    """A directory where a child cgroup with a memory limit can be made, with the names of
    its limit file and of the file that takes a process."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, place = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / place.lstrip("/")
            return base, "memory.limit_in_bytes", "cgroup.procs"
        if controllers == "":
            base = Path("/sys/fs/cgroup") / place.lstrip("/")
            if "memory" in (base / "cgroup.subtree_control").read_text(errors="ignore"):
                return base, "memory.max", "cgroup.procs"
    return None


@pytest.fixture
def limited_group() -> Iterator[Path]:
    found = _own_group() if os.geteuid() == 0 else None
    if found is None:
        pytest.skip("no memory cgroup this test may make a child in (needs root)")
    base, limit_file, _ = found
    group = base / f"release-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / limit_file).write_text(str(LIMIT))
    except OSError as error:
        pytest.skip(f"cannot make a memory cgroup under {base}: {error.strerror}")
    try:
        yield group
    finally:
        group.rmdir()


def test_the_jobs_follow_the_limit_of_the_cgroup_the_build_runs_in(limited_group: Path) -> None:
    code = "from release.building.jobs import available_memory; print(available_memory())"
    script = f'echo $$ > "{limited_group}/cgroup.procs" && exec "{sys.executable}" -c "{code}"'
    done = subprocess.run(
        ["/bin/sh", "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    available = int(done.stdout)
    assert 0 < available <= LIMIT, f"{available / GIB:.1f} GiB inside a {LIMIT // GIB} GiB cgroup"
    outside = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert int(outside.stdout) > LIMIT, "this machine has more than the limit outside it"
    jobs = compile_jobs(cpus=64, memory=available, side_by_side=1)
    assert jobs.jobs == max(1, available // MEMORY_PER_JOB) == 1
