"""Options and edges several commands share."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from release.build.jobs import available_memory, cpus
from release.commands.options import output_dir_problem
from release.console import Output
from release.errors import ConfigError, FileError
from release.fsutil import write_atomic
from release.matrix import Matrix, load_matrix
from release.matrix.compilecache import CompileCache, parse_compile_cache
from release.toolchain.cacheroot import default_cache_dir
from release.toolchain.projectmeta import asking_the_backend


def output_for(args: argparse.Namespace, command: str) -> Output:
    return Output(
        os.environ,
        json_mode=bool(getattr(args, "json", False)),
        json_file=getattr(args, "json_file", None),
        command=command,
    )


def write_report(
    out: Output, document: Mapping[str, Any], markdown: str, file: Path | None
) -> None:
    """A command's result: its JSON document, then its Markdown in `file` (--markdown) when
    given and in the GitHub step summary."""
    out.document(document)
    if file is not None:
        write_atomic(file, markdown.encode())
    out.summary(markdown)


def cuda_home(args: argparse.Namespace) -> Path | None:
    if args.cuda_home is not None:
        return Path(args.cuda_home)
    value = os.environ.get("CUDA_HOME")
    return Path(value) if value else None


def cache_dir(args: argparse.Namespace) -> Path:
    if args.cache_dir is not None:
        return Path(args.cache_dir).resolve()
    return default_cache_dir(os.environ, Path.home()).resolve()


def load(path: Path, args: argparse.Namespace, out: Output) -> Matrix:
    """The matrix at `path`. The project's name and version are read from its files; where
    they are computed, its build backend is asked (once per commit, in the cache of
    --cache-dir), and `out` says so, and what that installs, before anything is."""
    given = getattr(args, "cache_dir", None)
    cache = Path(given) if given is not None else None
    return load_matrix(path, asking_the_backend(cache, dict(os.environ), out.note))


def machine(args: argparse.Namespace) -> dict[str, Any]:
    """BuildSettings' say in how many compiles a cell runs at once: --compile-jobs where the
    command has it, this process's CPUs, the memory left to it."""
    return {
        "compile_jobs": getattr(args, "compile_jobs", None),
        "cpus": cpus(),
        "memory": available_memory(),
    }


COMPILE_CACHE_VARIABLE = "RELEASE_COMPILE_CACHE"


def add_compile_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--compile-cache",
        type=compile_cache_spec,
        default=None,
        metavar="STORAGE",
        help="where the cmake and torch backends' compiles and csrc's nvcc compiles (sccache) "
        "keep their objects, over "
        f"{COMPILE_CACHE_VARIABLE} and matrix.yaml's compile-cache: none, local, local:DIR, "
        "github-actions or s3://BUCKET/PREFIX?endpoint=URL&region=R (S3 keys from "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)",
    )


def compile_cache_spec(text: str) -> CompileCache:
    """argparse type of --compile-cache."""
    try:
        return parse_compile_cache(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def compile_cache(args: argparse.Namespace, matrix: Matrix) -> CompileCache:
    """--compile-cache, else RELEASE_COMPILE_CACHE, else matrix.yaml's compile-cache."""
    given: CompileCache | None = getattr(args, "compile_cache", None)
    if given is not None:
        return given
    value = os.environ.get(COMPILE_CACHE_VARIABLE, "").strip()
    if value:
        try:
            return parse_compile_cache(value)
        except ValueError as error:
            raise ConfigError(
                [f"{COMPILE_CACHE_VARIABLE}: {error}"],
                hint=f"unset {COMPILE_CACHE_VARIABLE} to use matrix.yaml's compile-cache",
            ) from None
    return matrix.compile_cache


def output_dir(path: Path, option: str) -> Path:
    """`path` as a directory this command can write to, created if needed; a FileError
    naming the option otherwise."""
    problem = output_dir_problem(path)
    if problem is not None:
        raise FileError(f"{option} {path}: {problem}")
    resolved = path.resolve()
    try:
        resolved.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FileError.of(error, f"create {option}") from None
    return resolved


def parse_overrides(values: list[str]) -> dict[str, str]:
    """`--index-url NAME=URL` options (NAME: a destination or a local label)."""
    out = {}
    problems = []
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            problems.append(f"--index-url {value!r}: write NAME=URL (NAME: a destination or label)")
            continue
        out[name] = url if url.endswith("/") else url + "/"
    if problems:
        raise ConfigError(problems)
    return out
