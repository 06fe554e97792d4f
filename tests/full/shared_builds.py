"""The full tier's expensive builds, made once per session and shared (docs/testing.md).

- `shipped_build`: one cold `release build` of the shipped matrix.yaml, exactly the
  interface goldens' `build` invocation (tests/integration/interface.py: SOURCE_DATE_EPOCH
  fixed, the repository root, a cache of its own whose toolchains are the session's).
  test_build, test_csrc_build, the reproducible pair's first side and the interface goldens
  read what it made.
- `torch_environment`: the torch cell's environment (the pinned torch in a venv of its
  Python, and its CUDA_HOME) as `release build` provisions it into the session's
  toolchains.
- `torch_stable`, `torch_regular`: the torch fixture (tests/fixtures/torch_ops) built by
  `release build` in its two flavours, libtorch's stable ABI (for the SMs of COVERED_SMS)
  and the regular one (for one SM), with a cache of their own (`torch_cache`).

What these made is read, never changed: a test that builds into a cache takes a copy
(`cache_copy`) or a cache of its own (`linked_cache`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.building.events import BuildEvents
from release.building.settings import BuildSettings
from release.building.stage import prepare
from release.matrix import load_matrix
from release.toolchain import host_machine
from release.toolchain.torchenv import TorchEnv
from tests.conftest import run_dir
from tests.integration.interface import Workspace, workspace_at

REPO = Path(__file__).resolve().parents[2]
TORCH_FIXTURE = REPO / "tests" / "fixtures" / "torch_ops"
TORCH = "2.14.1"
TORCH_EPOCH = "1700000000"
TORCH_WHEEL = "k3_torch_ops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
TORCH_CELL = f"13.0-x86_64-torch{TORCH}"
TORCH_CLI = "import sys; from release.cli import main; sys.exit(main(sys.argv[1:]))"

# A torch project's matrix of one x86_64 cell, for str.format: {env} is build.env's flow
# mapping (the torch fixture's: K3_TORCH_ABI and K3_TORCH_UNPINNED). The stable flavour
# builds against torch 2.14.1, the torch on this machine's disk, on purpose (torch-build:
# newer): the oldest its wheel admits on CUDA 13 is PyPI's 2.11.0, which a stable-ABI build
# takes by default (its wheel still requires torch>=2.11, read from PyPI's torch page).
TORCH_MATRIX = """\
project: {project}
build:
  backend: torch
  env: {env}
defaults:
  arches: [x86_64]
  sms: [{sms}]
  ptx: {ptx}
  manylinux: "2_34"
cuda:
  "13.0":
    destination: pypi
    torch: "{torch}"
    torch-build: newer
    abi3: "3.10"
destinations:
  pypi: {{kind: pypi}}
"""
# The SMs the stable flavour is built for: its device code per target is what
# test_torch_backend checks. Every other torch build is for one SM.
COVERED_SMS = ("75", "80", "90", "100")
ONE_SM = "90"


def torch_matrix(abi: str, *, sms: tuple[str, ...] = (ONE_SM,), ptx: str = "none") -> str:
    """The torch fixture's matrix.yaml for one flavour, its SMs and PTX target."""
    env = f'{{K3_TORCH_ABI: {abi}, K3_TORCH_UNPINNED: "1"}}'
    return TORCH_MATRIX.format(
        project=TORCH_FIXTURE, env=env, sms=", ".join(sms), ptx=ptx, torch=TORCH
    )


@contextmanager
def made_once(name: str) -> Iterator[tuple[Path, bool]]:
    """A directory of the run that all its xdist workers share (tests/conftest.py's
    run_dir), and whether this process is to make it: the first to ask makes it holding a
    lock, any other waits for it and then finds it made (a maker that failed half-way
    leaves it to be made again)."""
    where = run_dir() / "shared" / name
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = where.parent / f"{name}.made"
        if made.exists():
            yield where, False
            return
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir()
        yield where, True
        made.touch()


def linked_cache(where: Path, release_cache: Path) -> Path:
    """A cache directory of its own (device code, wheels, compile cache) whose toolchains
    are the session's."""
    where.mkdir(parents=True)
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (where / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
    return where


def cache_copy(cache: Path, where: Path) -> Path:
    """`cache` (its device code, wheels and compile cache) copied to `where`; the toolchains
    stay the session's."""
    shutil.copytree(cache, where, symlinks=True)
    return where


@dataclass(frozen=True)
class ShippedBuild:
    """The shipped matrix's cold build: dist/ and cache/ under the interface workspace's
    temporary directory, and what the command printed."""

    workspace: Workspace

    @property
    def result(self) -> subprocess.CompletedProcess[str]:
        return self.workspace.results["build"]

    @property
    def dist(self) -> Path:
        return self.workspace.tmp / "dist"

    @property
    def cache(self) -> Path:
        return self.workspace.tmp / "cache"

    @property
    def code(self) -> int:
        return self.result.returncode

    @property
    def stderr(self) -> str:
        return self.result.stderr

    def cache_copy(self, where: Path) -> Path:
        """The build's cache copied to `where`, for a test that builds into it."""
        return cache_copy(self.cache, where)


@pytest.fixture(scope="session")
def shipped_build(release_cache: Path) -> Iterator[ShippedBuild]:
    """`release build` of matrix.yaml in the repository root, from a cache with the
    session's toolchains but no device code or wheels, so that what its device log and
    `--json` document say is about this build. Made once a run: a worker that comes second
    reads what the first made (its result kept beside it as JSON)."""
    with made_once("shipped") as (tmp, first):
        if first:
            linked_cache(tmp / "cache", release_cache)
            with workspace_at(tmp, release_cache) as workspace:
                result = workspace.run("build")
            (tmp / "build-result.json").write_text(
                json.dumps(
                    {"args": result.args, "returncode": result.returncode,
                     "stdout": result.stdout, "stderr": result.stderr}
                ),
                encoding="utf-8",
            )  # fmt: skip
    recorded = json.loads((tmp / "build-result.json").read_text(encoding="utf-8"))
    with workspace_at(tmp, release_cache, fresh=False) as workspace:
        workspace.results["build"] = subprocess.CompletedProcess(**recorded)
        yield ShippedBuild(workspace)


@pytest.fixture(scope="session")
def torch_cache(release_cache: Path) -> Path:
    """The torch builds' cache: their own device code, wheels and compile cache (so that a
    build of this session is never served from an earlier one's), the session's toolchains."""
    if host_machine() != "x86_64":
        pytest.skip("the torch fixture's matrix is an x86_64 one")
    with made_once("torch-cache") as (where, first):
        if first:
            linked_cache(where / "cache", release_cache)
    return where / "cache"


@pytest.fixture(scope="session")
def torch_environment(torch_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> TorchEnv:
    """The torch cell's environment, provisioned as `release build` provisions it (the
    builds of the torch fixture and the setup.py project's metadata then find it)."""
    where = tmp_path_factory.mktemp("torch-environment")
    (where / "matrix.yaml").write_text(torch_matrix("stable"), encoding="utf-8")
    matrix = load_matrix(where / "matrix.yaml")
    settings = BuildSettings(
        matrix=matrix,
        cells=matrix.cells,
        out=where / "dist",
        cache_dir=torch_cache,
        environ=dict(os.environ),
    )
    settings, _ = prepare(settings, BuildEvents())
    (environment,) = settings.environments.values()
    assert isinstance(environment, TorchEnv), environment
    assert environment.site_packages is not None, environment
    return environment


@dataclass(frozen=True)
class TorchBuild:
    """One flavour of the torch fixture as `release build` made it."""

    abi: str
    matrix: Path
    dist: Path
    cache: Path  # the session's `torch_cache`: copy it to build into it

    @classmethod
    def at(cls, where: Path, abi: str, cache: Path) -> TorchBuild:
        """The flavour `build_torch_flavour` built in `where`."""
        return cls(abi=abi, matrix=where / "matrix.yaml", dist=where / "dist", cache=cache)

    @property
    def wheel(self) -> Path:
        return self.dist / TORCH_WHEEL

    @property
    def manifest(self) -> Path:
        return self.dist / "manifest.json"

    @property
    def log(self) -> Path:
        return self.dist / "logs" / f"{TORCH_CELL}.log"


def build_torch_flavour(
    abi: str, sms: tuple[str, ...], ptx: str, cache: Path, where: Path
) -> TorchBuild:
    """The fixture's wheel of one flavour, through `release build` in a process of its own.

    RELEASE_FIXTURE_WHEELHOUSE=DIR keeps the wheel in DIR/<abi>/ (for the H200 run)."""
    matrix = where / "matrix.yaml"
    matrix.write_text(torch_matrix(abi, sms=sms, ptx=ptx), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", TORCH_CLI,
         "build", "--matrix", str(matrix), "--out", str(where / "dist"), "--cache-dir", str(cache)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": TORCH_EPOCH},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    built = TorchBuild.at(where, abi, cache)
    assert built.wheel.is_file(), sorted(p.name for p in built.dist.iterdir())
    kept = os.environ.get("RELEASE_FIXTURE_WHEELHOUSE")
    if kept:
        Path(kept, abi).mkdir(parents=True, exist_ok=True)
        shutil.copy2(built.wheel, Path(kept, abi) / built.wheel.name)
    return built


@pytest.fixture(scope="session")
def torch_stable(torch_environment: TorchEnv, torch_cache: Path) -> TorchBuild:
    """The stable flavour (libtorch's stable ABI, TORCH_TARGET_VERSION 2.10), for the SMs
    of COVERED_SMS and PTX of the highest."""
    with made_once("torch-stable") as (where, first):
        if first:
            build_torch_flavour("stable", COVERED_SMS, COVERED_SMS[-1], torch_cache, where)
    return TorchBuild(
        abi="stable", matrix=where / "matrix.yaml", dist=where / "dist", cache=torch_cache
    )


@pytest.fixture(scope="session")
def torch_regular(torch_environment: TorchEnv, torch_cache: Path) -> TorchBuild:
    """The regular flavour (ATen and TORCH_LIBRARY: loads beside its torch only), for one
    SM and no PTX."""
    with made_once("torch-regular") as (where, first):
        if first:
            build_torch_flavour("regular", (ONE_SM,), "none", torch_cache, where)
    return TorchBuild(
        abi="regular", matrix=where / "matrix.yaml", dist=where / "dist", cache=torch_cache
    )
