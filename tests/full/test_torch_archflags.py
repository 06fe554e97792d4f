"""A torch extension whose setup.py passes its own fixed -gencode list
(tests/fixtures/torch_gencode, three .cu files): torch's cpp_extension then drops
TORCH_CUDA_ARCH_LIST. A cell that asks for other targets stops within its first compile,
counted as the nvcc runs its build log shows (ninja -v prints each command it starts), with
why and the two ways out; the same fixture with the cell set to the project's list builds
as before."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.records.manifest import read_manifest
from release.toolchain import host_machine
from tests.integration.test_archflags_preview import CLI, MATRIX, TORCH

pytestmark = pytest.mark.slow

CELL = f"13.0-x86_64-torch{TORCH}"
WHEEL = "k3_gencode-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
OWN = "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=[sm_90,compute_90]"


@dataclass(frozen=True)
class Run:
    code: int
    said: str
    dist: Path

    @property
    def log(self) -> str:
        return (self.dist / "logs" / f"{CELL}.log").read_text(encoding="utf-8")


def release(tmp_path: Path, cache: Path, sms: str, ptx: str, *extra: str) -> Run:
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.replace("SMS", sms).replace("PTX", ptx), encoding="utf-8")
    dist = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-c", CLI, "build", "--matrix", str(matrix), "--out", str(dist),
         "--cache-dir", str(cache), *extra],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
    )  # fmt: skip
    return Run(code=done.returncode, said=done.stdout + done.stderr, dist=dist)


def nvcc_runs(log: str) -> set[str]:
    """The .cu files nvcc was started on, from the ninja lines of a build log (a failed
    command is printed twice: when it starts and under FAILED)."""
    started = re.compile(r"cuda-home/bin/nvcc .*?-c (\S+\.cu) ")
    return {m.group(1) for line in log.splitlines() if (m := started.search(line))}


def test_a_cell_asking_for_other_targets_stops_within_the_first_compile_and_says_why(
    release_cache: Path, tmp_path: Path
) -> None:
    # one compile at a time: with N, ninja starts N at once, each stopped before nvcc runs
    run = release(tmp_path, release_cache, "[75, 80, 90, 100]", "100", "--compile-jobs", "1")
    assert run.code == 4, run.said[-3000:]
    assert len(nvcc_runs(run.log)) == 1, sorted(nvcc_runs(run.log))
    lines = run.said.splitlines()
    first = next(i for i, line in enumerate(lines) if "stopped at its first compile" in line)
    told = lines[first : first + 7]
    assert (
        told[1].split(":", 1)[1].strip().startswith("sm_75, sm_80, sm_90, sm_100, PTX compute_100")
    )
    assert told[2].endswith("the project's flags ask for: sm_80, sm_90, PTX compute_90")
    assert re.search(rf"they come from: +csrc/\w+\.cu, compiled with {re.escape(OWN)}$", told[3])
    assert "torch's cpp_extension ignores TORCH_CUDA_ARCH_LIST" in told[4]
    assert told[5].endswith("sms: [80, 90] and ptx: 90")
    assert "setup.py honour TORCH_CUDA_ARCH_LIST" in told[6]
    assert "the PEP 517 build failed" not in run.said  # not a compiler-error dump
    assert read_manifest(run.dist / "manifest.json").wheels == ()
    assert not list(run.dist.glob("*.whl"))


def fresh_caches(tmp_path: Path, release_cache: Path) -> Path:
    """A cache directory with the session's toolchains (the torch environment) and empty
    wheel and compile caches: the build compiles, whatever an earlier run kept."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (cache / "toolchains").symlink_to(release_cache / "toolchains")
    return cache


def test_the_same_fixture_with_the_cell_set_to_the_projects_list_builds(
    release_cache: Path, tmp_path: Path
) -> None:
    run = release(tmp_path, fresh_caches(tmp_path, release_cache), "[80, 90]", "90")
    assert run.code == 0, run.said[-3000:]
    assert len(nvcc_runs(run.log)) == 3  # every .cu compiled
    assert "passes its own nvcc arch flags" not in run.said
    assert "stopped" not in run.said
    (entry,) = read_manifest(run.dist / "manifest.json").wheels
    assert entry.filename == WHEEL
    assert (entry.sms, entry.ptx) == (("80", "90"), "90")
    assert [label for label, _ in entry.device_bytes] == ["sm_80", "sm_90", "ptx_90"]
