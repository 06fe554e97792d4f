"""Where the cache lives: one root (`--cache-dir`, else `default_cache_dir`) with the
provisioned toolchains under `toolchains/`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CACHE_DIR_VARIABLE = "RELEASE_CACHE_DIR"


def default_cache_dir(env: Mapping[str, str], home: Path) -> Path:
    """$RELEASE_CACHE_DIR, else $XDG_CACHE_HOME/cuda-wheel-release, else ~/.cache/..."""
    return cache_root(env, home)[0]


def cache_root(env: Mapping[str, str], home: Path) -> tuple[Path, str]:
    """The default cache root and where it comes from (the variable, or `default`)."""
    if env.get(CACHE_DIR_VARIABLE):
        return Path(env[CACHE_DIR_VARIABLE]), f"${CACHE_DIR_VARIABLE}"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "cuda-wheel-release", "$XDG_CACHE_HOME"
    return home / ".cache" / "cuda-wheel-release", "default"


def toolchain_cache(root: Path) -> Path:
    """The provisioned toolchains under the cache root `root`."""
    return root / "toolchains"
