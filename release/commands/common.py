"""Options and edges several commands share."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from release.toolchain import default_cache_dir


def add_toolchain_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cuda-home",
        type=Path,
        default=None,
        metavar="DIR",
        help="use this CUDA toolkit (bin/nvcc) instead of the PyPI toolchain "
        "(default: $CUDA_HOME if set)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="toolchains, device code and wheels cache "
        "(default: $RELEASE_CACHE_DIR or ~/.cache/cuda-wheel-release)",
    )


def cuda_home(args: argparse.Namespace) -> Path | None:
    if args.cuda_home is not None:
        return Path(args.cuda_home)
    value = os.environ.get("CUDA_HOME")
    return Path(value) if value else None


def cache_dir(args: argparse.Namespace) -> Path:
    if args.cache_dir is not None:
        return Path(args.cache_dir).resolve()
    return default_cache_dir(os.environ, Path.home()).resolve()
