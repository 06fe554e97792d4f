"""The compile cache against real parts: the cmake fixture, and csrc's nvcc cell, built
through the real sccache on a real S3 API (moto's server on 127.0.0.1). A second runner
with empty local directories (csrc's device cache too) compiles nothing the first
compiled; a store out of reach slows a build down and says so, and changes no byte; the
S3 keys appear nowhere."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from release.building.compilecache import CacheStats
from release.building.events import BuildEvents
from release.building.pipeline import build_cell
from release.building.settings import BuildSettings, CellResult
from release.building.stage import prepare
from release.matrix import load_matrix
from release.matrix.compilecache import CompileCache, parse_compile_cache
from release.toolchain import host_machine
from tests.s3_server import SECRET_KEY, S3Server, s3_server

__all__ = ["s3_server"]

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cmake_kernels"
ROOT = Path(__file__).resolve().parents[2]
BUCKET = "k3-compile-cache"
CSRC_BUCKET = "k3-csrc-compile-cache"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cmake fixture for one SM (a quicker compile), in a checkout of the test's."""
    if host_machine() != "x86_64":
        pytest.skip("the cmake fixture's cell is x86_64")
    root = tmp_path_factory.mktemp("checkout") / "cmake_kernels"
    shutil.copytree(FIXTURE, root)
    text = (root / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("sms: [75, 80, 86, 89, 90, 100]", "sms: [90]").replace(
        "ptx: 100", "ptx: none"
    )
    (root / "matrix.yaml").write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def csrc_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped matrix and csrc, for one SM of the nvcc cell (13.0 x86_64)."""
    if host_machine() != "x86_64":
        pytest.skip("csrc's nvcc cell is built here for x86_64")
    root = tmp_path_factory.mktemp("csrc-checkout")
    shutil.copytree(
        ROOT / "csrc", root / "csrc", ignore=shutil.ignore_patterns("build", "dist", "__pycache__")
    )
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    for shipped, one in (
        ("arches: [x86_64, aarch64]", "arches: [x86_64]"),
        ("sms: [75, 80, 86, 89, 90, 100]", "sms: [90]"),
        ("ptx: 100", "ptx: none"),
    ):
        assert shipped in text
        text = text.replace(shipped, one)
    (root / "matrix.yaml").write_text(text, encoding="utf-8")
    return root


def runner_build(
    project: Path,
    cache: CompileCache,
    runner: Path,
    environ: dict[str, str],
    toolchains: Path,
    *,
    cell_id: str | None = None,
) -> CellResult:
    """The cell (the matrix's one, else `cell_id`) as a fresh runner builds it: empty local
    directories under `runner` (wheel cache, compile cache, csrc's device cache) and the
    same checkout and output paths as every other runner."""
    shutil.rmtree(runner, ignore_errors=True)
    matrix = load_matrix(project / "matrix.yaml")
    (cell,) = [c for c in matrix.cells if cell_id in (None, c.id)]
    settings = BuildSettings(
        matrix=matrix,
        cells=(cell,),
        out=project.parent / "dist",
        cache_dir=toolchains,
        work_dir=runner,
        environ=environ,
        epoch=1700000000,
        compile_cache=cache,
    )
    settings, prepared = prepare(settings, BuildEvents())
    settings.out.mkdir(parents=True, exist_ok=True)
    result = build_cell(cell, prepared[cell.id], settings, sources="test")
    assert result.ok, f"{result.error}\n{result.log_tail}"
    return result


def first_runner_filled_the_store(
    first: CellResult, s3_server: S3Server, bucket: str, prefix: str
) -> CacheStats:
    """A cold runner on an empty store: it missed, hit nothing, reached the store, and
    left its objects under the prefix."""
    assert first.compile_cache is not None
    assert first.compile_cache.misses >= 1
    assert first.compile_cache.hits == 0
    assert first.compile_cache.fallback is None
    stored = s3_server.keys(bucket)
    assert stored
    assert all(key.startswith(prefix) for key in stored)
    return first.compile_cache


def test_a_second_runner_compiles_nothing_the_first_compiled(
    project: Path, s3_server: S3Server, release_cache: Path, tmp_path: Path
) -> None:
    s3_server.create_bucket(BUCKET)
    environ = {**os.environ, **s3_server.env()}
    store = parse_compile_cache(f"s3://{BUCKET}/k3/?endpoint={s3_server.endpoint}&region=auto")

    first = runner_build(project, store, tmp_path / "runner-1", environ, release_cache)
    cold = first_runner_filled_the_store(first, s3_server, BUCKET, "k3/")

    second = runner_build(project, store, tmp_path / "runner-2", environ, release_cache)
    assert second.compile_cache is not None
    assert (second.compile_cache.hits, second.compile_cache.misses) == (
        cold.misses,
        0,
    )
    assert second.report is not None
    assert first.report is not None
    assert second.report.sha256 == first.report.sha256

    # a store out of reach: the cell builds on its local directory, says so, same bytes
    closed = parse_compile_cache(f"s3://{BUCKET}/k3/?endpoint=http://127.0.0.1:9&region=auto")
    unreachable = runner_build(project, closed, tmp_path / "runner-3", environ, release_cache)
    assert unreachable.compile_cache is not None
    assert unreachable.compile_cache.fallback is not None
    assert "out of reach" in unreachable.compile_cache.line()
    assert "127.0.0.1:9" in unreachable.compile_cache.line()
    assert unreachable.compile_cache.misses >= 1
    assert unreachable.report is not None
    assert unreachable.report.sha256 == first.report.sha256

    # no cache at all: the same bytes again
    off = runner_build(
        project, CompileCache(storage="none"), tmp_path / "r4", environ, release_cache
    )
    assert off.report is not None
    assert off.report.sha256 == first.report.sha256
    assert off.compile_cache is not None
    assert off.compile_cache.hits == 0

    for result in (first, second, unreachable, off):
        assert result.log is not None
        texts = [
            result.log.read_text(encoding="utf-8"),
            result.compile_cache.line() if result.compile_cache else "",
            result.reproduce,
        ]
        assert not any(SECRET_KEY in text for text in texts)


def test_a_second_runner_compiles_none_of_csrcs_device_code_the_first_compiled(
    csrc_checkout: Path, s3_server: S3Server, release_cache: Path, tmp_path: Path
) -> None:
    """csrc's nvcc compiles go through the store behind its device cache: a runner with an
    empty device cache gets every cubin from the store, and the same wheel."""
    s3_server.create_bucket(CSRC_BUCKET)
    environ = {**os.environ, **s3_server.env()}
    store = parse_compile_cache(
        f"s3://{CSRC_BUCKET}/csrc/?endpoint={s3_server.endpoint}&region=auto"
    )
    cell = "13.0-x86_64"

    def build(cache: CompileCache, runner: str) -> CellResult:
        return runner_build(
            csrc_checkout, cache, tmp_path / runner, environ, release_cache, cell_id=cell
        )

    first = build(store, "r1")
    cold = first_runner_filled_the_store(first, s3_server, CSRC_BUCKET, "csrc/")

    second = build(store, "r2")
    assert second.compile_cache is not None
    assert (second.compile_cache.hits, second.compile_cache.misses) == (
        cold.misses,
        0,
    )

    off = build(CompileCache(storage="none"), "r3")
    assert off.compile_cache is not None
    assert off.compile_cache.hits == 0
    assert first.report is not None
    assert second.report is not None
    assert off.report is not None
    assert first.report.sha256 == second.report.sha256 == off.report.sha256
    assert first.log is not None
    assert SECRET_KEY not in first.log.read_text(encoding="utf-8")
