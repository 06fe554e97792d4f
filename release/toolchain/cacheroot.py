"""Where the cache lives: one root (`--cache-dir`, else `default_cache_dir`) with the
provisioned toolchains under `toolchains/`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def default_cache_dir(env: Mapping[str, str], home: Path) -> Path:
    """$RELEASE_CACHE_DIR, else $XDG_CACHE_HOME/cuda-wheel-release, else ~/.cache/..."""
    if env.get("RELEASE_CACHE_DIR"):
        return Path(env["RELEASE_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "cuda-wheel-release"
    return home / ".cache" / "cuda-wheel-release"


def toolchain_cache(root: Path) -> Path:
    """The provisioned toolchains under the cache root `root`."""
    return root / "toolchains"
