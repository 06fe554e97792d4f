"""The compile cache on a project big enough for it to matter, measured side by side in one
run: a generated scikit-build-core + CMake CUDA project of --units translation units
(default 24) whose host code instantiates --unit-chunks thousand templates each (10: about
12 s and 300 MiB of nvcc a unit, so that compiling, not CMake's configure, is what a cache
can save), built through `release`'s cell pipeline with the real sccache on a real S3
API (moto's server on 127.0.0.1, started here).

1. cold: the first runner, an empty store and empty local directories
2. second cold runner: empty local directories, the store the first one filled
   (goal: <= 0.2 of cold, 0 misses, the same wheel bytes)
3. one changed file: a third empty runner after one unit changed (goal: 1 miss)
4. compile jobs on a memory-limited runner: a second generated project of --heavy-units
   units whose host code instantiates --heavy-chunks thousand templates (about 1.1 GiB and
   70 s a compile at 60), built inside a real memory cgroup (v1 or v2) limited to
   --limit-gib, once with the jobs `release` chooses for that limit and once with one job
   per core, from empty caches; each build's peak is the cgroup's own count (v1
   `memory.max_usage_in_bytes`, v2 `memory.peak`). Skipped, and said so, where no memory
   cgroup can be made (not root)

Every runner builds from the same checkout path, as CI runners do. Run:
    .venv/bin/python benchmarks/compile_cache.py [--units 24] [--unit-chunks 10] [--keep DIR]
It ends with the lines `shared-store cold runner / cold: R`, `misses on the second
runner: N` and `misses after one changed file: N`. `--heavy-units 0` leaves part 4 out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from release.building.events import BuildEvents  # noqa: E402
from release.building.jobs import compile_jobs  # noqa: E402
from release.building.pipeline import build_cell  # noqa: E402
from release.building.settings import BuildSettings, CellResult  # noqa: E402
from release.building.stage import prepare  # noqa: E402
from release.matrix import load_matrix  # noqa: E402
from release.matrix.compilecache import CompileCache, parse_compile_cache  # noqa: E402
from tests.s3_server import S3Server, free_port  # noqa: E402

BUCKET = "bench-compile-cache"
MARKER = "RELEASE_BENCH_RUN"  # in every process of a measured build, for PeakMemory
CMAKE = """\
cmake_minimum_required(VERSION 3.26)
project(bench_kernels LANGUAGES CXX CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
file(GLOB UNITS CONFIGURE_DEPENDS csrc/*.cu)
add_library(bench SHARED ${UNITS})
install(TARGETS bench LIBRARY DESTINATION bench_kernels)
"""
PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "bench-kernels"
version = "0.1.0"

[tool.scikit-build]
cmake.build-type = "Release"
wheel.py-api = "py3"
wheel.packages = ["src/bench_kernels"]
"""
MATRIX = """\
project: .
build: {backend: cmake}
defaults: {arches: [x86_64], sms: [80, 90], ptx: none, manylinux: "2_34"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""
UNIT = """\
#include <cuda_runtime.h>
namespace {{
template <int N>
__global__ void step_{i}(float* x, float a, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
#pragma unroll
  for (int k = 0; k < N; ++k) v = v * a + {i}.0f / (k + 1);
  x[i] = v;
}}
}}
extern "C" void bench_{i}(float* x, float a, int n) {{
  step_{i}<8><<<(n + 255) / 256, 256>>>(x, a, n);
  step_{i}<16><<<(n + 255) / 256, 256>>>(x, a, n);
  step_{i}<32><<<(n + 255) / 256, 256>>>(x, a, n);
}}
"""


HEAVY_UNIT = """\
#include <utility>
#include <cuda_runtime.h>
namespace {{
template <int N> struct R {{ static constexpr long v = N * 3L + {i}; long pad[N % 13 + 1]; }};
template <int B, int... Ns> constexpr long chunk(std::integer_sequence<int, Ns...>) {{
  return (0L + ... + (R<B * 1000 + Ns>::v + sizeof(R<B * 1000 + Ns>)));
}}
template <int... Bs> constexpr long all(std::integer_sequence<int, Bs...>) {{
  return (0L + ... + chunk<Bs>(std::make_integer_sequence<int, 1000>{{}}));
}}
__global__ void fill_{i}(long* x, long v) {{ *x = v; }}
}}
extern "C" void heavy_{i}(long* x) {{
  fill_{i}<<<1, 1>>>(x, all(std::make_integer_sequence<int, {chunks}>{{}}));
}}
"""


def generate(root: Path, units: int, unit: str = UNIT, **fill: int) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "src" / "bench_kernels").mkdir(parents=True)
    (root / "src" / "bench_kernels" / "__init__.py").write_text("", encoding="utf-8")
    (root / "CMakeLists.txt").write_text(CMAKE, encoding="utf-8")
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / "matrix.yaml").write_text(MATRIX, encoding="utf-8")
    for i in range(units):
        text = unit.format(i=i, **fill)
        (root / "csrc" / f"unit_{i:02d}.cu").write_text(text, encoding="utf-8")
    return root


class PeakMemory:
    """The largest sum of resident memory of the processes whose environment holds
    `marker` (the build's, sccache's server and the compiles it runs, which are not this
    process's descendants), sampled every 0.1 s."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._resident())

    def _resident(self) -> int:
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if self.marker not in (entry / "environ").read_bytes():
                    continue
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, IndexError, ValueError):
                continue
        return total


class MemoryGroup:
    """A child memory cgroup with a limit that this process (and so every process the
    build starts, sccache's server and its compiles included) runs in while inside the
    `with`; `peak` is the kernel's count of the most the group held. Past the limit the OOM
    killer takes the group's largest process: a compile (about 1 GiB), not this one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.peak = 0
        found = _memory_cgroup()
        if found is None:
            raise OSError("no memory cgroup (v1 or v2) to make a child in")
        self.parent, self.v2 = found
        self.path = self.parent / f"bench-{os.getpid()}-{time.monotonic_ns()}"

    def __enter__(self) -> MemoryGroup:
        self.path.mkdir()
        (self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes")).write_text(
            str(self.limit)
        )
        if not self.v2:
            (self.path / "memory.memsw.limit_in_bytes").write_text(str(self.limit))
        (self.path / "cgroup.procs").write_text(str(os.getpid()))
        return self

    def __exit__(self, *_: object) -> None:
        (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        peak = self.path / ("memory.peak" if self.v2 else "memory.max_usage_in_bytes")
        self.peak = int(peak.read_text())
        for _attempt in range(50):  # the killed build's last processes leave within moments
            try:
                self.path.rmdir()
                break
            except OSError:
                time.sleep(0.2)


def _memory_cgroup() -> tuple[Path, bool] | None:
    """This process's memory cgroup, and whether it is v2."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, place = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / place.lstrip("/"), False
        if controllers == "":
            here = Path("/sys/fs/cgroup") / place.lstrip("/")
            if "memory" in (here / "cgroup.subtree_control").read_text(errors="ignore"):
                return here, True
    return None


@dataclass(frozen=True)
class Run:
    seconds: float
    result: CellResult
    peak: int


def runner(
    project: Path, cache: CompileCache, where: Path, toolchains: Path, environ: dict[str, str],
    *, memory: int | None = None, compile_jobs: int | None = None, may_fail: bool = False,
) -> Run:  # fmt: skip
    """The cell as a fresh runner builds it (empty wheel cache and local directories)."""
    shutil.rmtree(where, ignore_errors=True)
    matrix = load_matrix(project / "matrix.yaml")
    (cell,) = matrix.cells
    settings = BuildSettings(
        matrix=matrix, cells=(cell,), out=project.parent / "dist", cache_dir=toolchains,
        work_dir=where, environ=environ, epoch=1700000000, compile_cache=cache,
        memory=memory, compile_jobs=compile_jobs,
    )  # fmt: skip
    settings, prepared = prepare(settings, BuildEvents())
    settings.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with PeakMemory(f"{MARKER}={environ[MARKER]}") as peak:
        result = build_cell(cell, prepared[cell.id], settings, sources=str(start))
    seconds = time.monotonic() - start
    if not result.ok and not may_fail:
        raise SystemExit(f"the build failed: {result.error}\n{result.log_tail}")
    return Run(seconds=seconds, result=result, peak=peak.peak)


def _line(name: str, run: Run) -> str:
    stats = run.result.compile_cache
    counts = f"{stats.hits} hits, {stats.misses} misses" if stats else "no compile"
    sha = run.result.report.sha256[:12] if run.result.report else "-"
    return f"{name:<34} {run.seconds:7.1f} s  {counts:<22} peak {run.peak / 2**20:6.0f} MiB  {sha}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", type=int, default=24)
    parser.add_argument("--keep", type=Path, help="keep the generated project and runs here")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(os.environ.get("RELEASE_TEST_CACHE", "")
                                               or tempfile.mkdtemp(prefix="bench-toolchains-")),
        help="where toolchains are provisioned (default: $RELEASE_TEST_CACHE, else fresh)",
    )  # fmt: skip
    parser.add_argument("--unit-chunks", type=int, default=10)
    parser.add_argument("--heavy-units", type=int, default=4)
    parser.add_argument("--heavy-chunks", type=int, default=60)
    parser.add_argument("--limit-gib", type=float, default=1.6)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-compile-cache-"))
    project = generate(root / "checkout", args.units, HEAVY_UNIT, chunks=args.unit_chunks)
    warm = generate(root / "warm-up-checkout", 1)
    server = S3Server(root=root, port=free_port())
    server.start()
    try:
        server.create_bucket(BUCKET)
        environ = {**os.environ, **server.env(), MARKER: str(os.getpid())}
        store = parse_compile_cache(f"s3://{BUCKET}/bench/?endpoint={server.endpoint}")
        toolchains = args.cache_dir.resolve()
        # provision the toolchains and cmake once, outside the measured runs
        runner(warm, CompileCache(storage="none"), root / "warm-up", toolchains, environ)
        cold = runner(project, store, root / "runner-1", toolchains, environ)
        second = runner(project, store, root / "runner-2", toolchains, environ)
        changed = project / "csrc" / "unit_00.cu"
        changed.write_text(changed.read_text().replace("* 3L", "* 5L"), encoding="utf-8")
        after = runner(project, store, root / "runner-3", toolchains, environ)
        memory_lines = memory_limited(args, root, toolchains, environ)
    finally:
        server.stop()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.units} translation units ({args.unit_chunks} thousand template instantiations "
        "each), sm_80 + sm_90, one cell (CUDA 13.0, x86_64)"
    )
    runs = [
        ("cold (empty store)", cold),
        ("second cold runner (shared store)", second),
        ("one changed file", after),
    ]
    for name, run in runs:
        print(_line(name, run))
    shas = {run.result.report.sha256 if run.result.report else None for run in (cold, second)}
    identical = len(shas) == 1 and None not in shas
    print(f"second runner's wheel identical to the cold one's: {'yes' if identical else 'NO'}")
    for line in memory_lines:
        print(line)
    print(f"shared-store cold runner / cold: {second.seconds / cold.seconds:.2f}")
    print(f"misses on the second runner: {_misses(second)}")
    print(f"misses after one changed file: {_misses(after)}")
    return 0


def memory_limited(
    args: argparse.Namespace, root: Path, toolchains: Path, environ: dict[str, str]
) -> list[str]:
    """Part 4: the heavy project in a memory cgroup of --limit-gib, with the jobs chosen for
    that limit and with one job per core; what each did, and its peak against the limit."""
    if args.heavy_units == 0:
        return ["memory-limited builds: left out (--heavy-units 0)"]
    limit = int(args.limit_gib * 2**30)
    cpus = len(os.sched_getaffinity(0))
    chosen_jobs = compile_jobs(cpus=cpus, memory=limit, side_by_side=1).jobs
    heavy = generate(root / "heavy-checkout", args.heavy_units, HEAVY_UNIT,
                     chunks=args.heavy_chunks)  # fmt: skip
    lines = [
        f"{args.heavy_units} heavy translation units ({args.heavy_chunks} thousand template "
        f"instantiations each) in a memory cgroup of {args.limit_gib:g} GiB"
    ]
    for name, jobs, kw in (
        (f"jobs chosen for the limit ({chosen_jobs})", chosen_jobs, {"memory": limit}),
        (f"one job per core ({cpus})", cpus, {"compile_jobs": cpus}),
    ):
        try:
            with MemoryGroup(limit) as group:
                run = runner(heavy, CompileCache(storage="none"), root / f"jobs-{jobs}",
                             toolchains, environ, may_fail=True, **kw)  # fmt: skip
        except OSError as error:
            return [f"memory-limited builds: skipped ({error})"]
        what = "ok" if run.result.ok else f"FAILED: {run.result.error}"
        lines.append(
            f"{name:<34} {run.seconds:7.1f} s  peak {group.peak / 2**20:6.0f} MiB "
            f"({group.peak / limit:.2f} of the limit)  {what}"
        )
    return lines


def _misses(run: Run) -> int:
    return run.result.compile_cache.misses if run.result.compile_cache else -1


if __name__ == "__main__":
    raise SystemExit(main())
