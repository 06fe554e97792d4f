"""The compile cache's pure parts: the one-line storage form, what sccache's server is
started with (the storage's own credentials, nobody else's), and its statistics as
hits and misses of the compiles a user wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from release.building.compilecache import CacheStats, parse_stats, server_env, startup_problem
from release.matrix.compilecache import CompileCache, parse_compile_cache

ENVIRON = {
    "PATH": "/usr/bin",
    "HOME": "/root",
    "GITHUB_TOKEN": "ghp_never_to_a_compiler_0001",
    "TWINE_PASSWORD": "pypi-never-to-sccache-0002",
    "AWS_ACCESS_KEY_ID": "AKIA0000EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "s3-secret-for-sccache-0003",
    "ACTIONS_RUNTIME_TOKEN": "actions-token-0004",
    "SCCACHE_BUCKET": "the-users-own-bucket",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", CompileCache(storage="none")),
        ("local", CompileCache()),
        ("local:/srv/cc", CompileCache(dir=Path("/srv/cc"))),
        ("github-actions", CompileCache(storage="github-actions")),
        (
            "s3://k3-cache/k3/kernels?endpoint=http://127.0.0.1:9000/&region=us-east-1",
            CompileCache(
                storage="s3",
                bucket="k3-cache",
                prefix="k3/kernels/",
                endpoint="http://127.0.0.1:9000",
                region="us-east-1",
            ),
        ),
        ("s3://k3-cache", CompileCache(storage="s3", bucket="k3-cache")),
    ],
)
def test_the_one_line_form_names_each_storage(text: str, expected: CompileCache) -> None:
    assert parse_compile_cache(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("redis://host", "expected none, local, local:DIR, github-actions or s3://"),
        ("s3://key:secret@bucket/p", "put no credential in the cache's URL"),
        ("s3://k3-cache/p?timeout=3", "unknown parameter 'timeout'"),
        ("s3://Bad_Bucket/p", "is not an S3 bucket name"),
        ("s3://k3-cache/p?endpoint=ftp://host", "is not an http(s) URL"),
        ("s3://k3-cache/p q", "letters, digits"),
        # a trailing newline (matched by a pattern's `$` before it)
        ("s3://k3-cache/p?region=eu-west-1%0A", "is not a region name"),
        ("s3://k3-cache/p?endpoint=http://h%0A", "is not an http(s) URL"),
    ],
)
def test_a_wrong_storage_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as caught:
        parse_compile_cache(text)
    assert "secret" not in str(caught.value)


def test_an_s3_server_gets_the_s3_keys_and_no_other_credential() -> None:
    cache = parse_compile_cache("s3://k3-cache/k3?endpoint=http://127.0.0.1:9000")
    env = server_env(cache, port=4226, local_dir=Path("/c/cell"), environ=ENVIRON)
    assert env["SCCACHE_BUCKET"] == "k3-cache"
    assert env["SCCACHE_S3_KEY_PREFIX"] == "k3/"
    assert env["SCCACHE_ENDPOINT"] == "http://127.0.0.1:9000"
    assert env["SCCACHE_S3_USE_SSL"] == "false"
    assert env["SCCACHE_SERVER_PORT"] == "4226"
    assert env["SCCACHE_DIR"] == "/c/cell"
    assert env["AWS_SECRET_ACCESS_KEY"] == ENVIRON["AWS_SECRET_ACCESS_KEY"]
    for name in ("GITHUB_TOKEN", "TWINE_PASSWORD", "ACTIONS_RUNTIME_TOKEN"):
        assert name not in env


def test_a_local_server_gets_no_credential_and_ignores_the_users_sccache_settings() -> None:
    env = server_env(CompileCache(), port=4226, local_dir=Path("/c/cell"), environ=ENVIRON)
    assert not any(k.startswith("AWS_") or "TOKEN" in k or "PASSWORD" in k for k in env)
    assert "SCCACHE_BUCKET" not in env  # the user's own sccache settings do not leak in
    assert env["SCCACHE_DIR"] == "/c/cell"


def test_an_actions_cache_server_gets_the_runtime_token_and_no_s3_key() -> None:
    env = server_env(
        CompileCache(storage="github-actions"), port=1, local_dir=Path("/c"), environ=ENVIRON
    )
    assert env["SCCACHE_GHA_ENABLED"] == "on"
    assert env["ACTIONS_RUNTIME_TOKEN"] == ENVIRON["ACTIONS_RUNTIME_TOKEN"]
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_s3_without_keys_reads_the_bucket_anonymously() -> None:
    env = server_env(parse_compile_cache("s3://k3-cache"), port=1, local_dir=Path("/c"), environ={})
    assert env["SCCACHE_S3_NO_CREDENTIALS"] == "true"


def test_stats_count_the_compiles_and_not_nvccs_parts() -> None:
    text = json.dumps(
        {
            "stats": {
                "cache_hits": {"counts": {"C/C++": 3, "CUDA": 2, "PTX": 2, "CUBIN": 4}},
                "cache_misses": {"counts": {"CUDA": 1, "CUDA (Device code)": 1, "CUBIN": 2}},
                "cache_read_errors": 1,
                "cache_write_errors": 2,
                "requests_not_cacheable": 4,
                "non_cacheable_compilations": 0,
            }
        }
    )
    stats = parse_stats(text, "local directory", None)
    assert (stats.hits, stats.misses, stats.errors, stats.uncacheable) == (5, 1, 3, 4)
    assert stats.line() == (
        "compile cache local directory: 5 hits, 1 misses, "
        "3 storage errors (those compiles ran, and were slower)"
    )


# What sccache 0.16 said of a csrc cell (13.0 x86_64, sms [90], ptx 90: two kernels, so
# two `nvcc --cubin` and two `nvcc --ptx` compiles), cold and then from the store: each
# compile is counted only by its parts, and as one "non-cacheable" whole.
CSRC_COLD_STATS: dict[str, object] = {
    "compile_requests": 4,
    "requests_not_cacheable": 0,
    "requests_executed": 10,
    "cache_errors": {"counts": {}, "adv_counts": {}},
    "cache_hits": {"counts": {"PTX": 1}, "adv_counts": {"ptx [cicc]": 1}},
    "cache_misses": {
        "counts": {"CUBIN": 2, "PTX": 3},
        "adv_counts": {"cubin [ptxas]": 2, "ptx [cicc]": 3},
    },
    "cache_read_errors": 0,
    "non_cacheable_compilations": 4,
    "cache_write_errors": 0,
    "cache_writes": 5,
    "compilations": 9,
}
CSRC_COLD = {"stats": CSRC_COLD_STATS, "version": "0.16.0"}
CSRC_WARM = {
    "stats": {
        **CSRC_COLD_STATS,
        "cache_hits": {
            "counts": {"CUBIN": 2, "PTX": 4},
            "adv_counts": {"cubin [ptxas]": 2, "ptx [cicc]": 4},
        },
        "cache_misses": {"counts": {}, "adv_counts": {}},
        "cache_writes": 0,
        "compilations": 4,
    },
    "version": "0.16.0",
}


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        # a kernel's --ptx compile found the cicc output of its --cubin compile (the same
        # cicc run): that compile ran nothing; the other kernel's two ran side by side
        (CSRC_COLD, (1, 3, 0)),
        (CSRC_WARM, (4, 0, 0)),
    ],
    ids=["cold", "from-the-store"],
)
def test_device_only_compiles_are_counted_by_their_parts(
    stats: dict[str, object], expected: tuple[int, int, int]
) -> None:
    parsed = parse_stats(json.dumps(stats), "local directory", None)
    assert (parsed.hits, parsed.misses, parsed.uncacheable) == expected


def test_a_device_compile_that_ran_ptxas_alone_missed() -> None:
    """cicc's output was in the store and ptxas's was not: that compile ran ptxas."""
    text = json.dumps(
        {
            "stats": {
                "cache_hits": {"counts": {"PTX": 2}},
                "cache_misses": {"counts": {"CUBIN": 2}},
                "non_cacheable_compilations": 2,
            }
        }
    )
    stats = parse_stats(text, "local directory", None)
    assert (stats.hits, stats.misses, stats.uncacheable) == (0, 2, 0)


def test_stats_that_are_not_sccaches_json_count_nothing() -> None:
    assert parse_stats("sccache: error", "off", None) == CacheStats(storage="off")


def test_a_failed_start_is_said_by_its_cause_not_its_backtrace() -> None:
    # sccache 0.16's output when its S3 endpoint refuses connections (abridged)
    output = """sccache: Starting the server...
sccache: error: Server startup failed: cache storage failed to read: Unexpected (temporary)

Context:
   url: http://127.0.0.1:9/k3/.sccache_check

Source:
   error sending request for url (http://127.0.0.1:9/k3/.sccache_check): Connection refused

Backtrace:
   0: <unknown>
  17: <unknown>
      at ./csu/../csu/libc-start.c:360:3
"""
    assert startup_problem(output) == (
        "error sending request for url (http://127.0.0.1:9/k3/.sccache_check): Connection refused"
    )
    assert startup_problem("sccache: error: Address in use\n") == "Address in use"
