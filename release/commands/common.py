"""Options and edges several commands share."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from release.build.jobs import available_memory, cpus
from release.commands.options import OutputDir, OutputFile, output_dir_problem
from release.console import Output
from release.errors import ConfigError, FileError
from release.fsutil import write_atomic
from release.matrix import Matrix, load_matrix
from release.matrix.compilecache import CompileCache, parse_compile_cache
from release.targets import ARCHES
from release.toolchain.cacheroot import default_cache_dir
from release.toolchain.projectmeta import asking_the_backend


@dataclass(frozen=True)
class Parents:
    """Options several commands share: `matrix` (--matrix), `output` (--json, --json-file),
    `cells` (--cuda, --arch: which cells of the matrix)."""

    matrix: argparse.ArgumentParser
    output: argparse.ArgumentParser
    cells: argparse.ArgumentParser


def parents() -> Parents:
    matrix = argparse.ArgumentParser(add_help=False)
    matrix.add_argument(
        "--matrix",
        type=Path,
        default=Path("matrix.yaml"),
        metavar="PATH",
        help="the release matrix (default: ./matrix.yaml)",
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument(
        "--json",
        action="store_true",
        help="write the result as one JSON document to stdout (the report goes to stderr)",
    )
    add_output_file(
        output,
        "--json-file",
        "also write that document to PATH (its directory must exist)",
        metavar="PATH",
    )
    cells = argparse.ArgumentParser(add_help=False)
    cells.add_argument(
        "--cuda",
        action="append",
        default=[],
        metavar="X.Y",
        help="only the cells of this CUDA version (repeatable; default: all)",
    )
    cells.add_argument(
        "--arch",
        action="append",
        default=[],
        choices=ARCHES,
        help="only the cells of this CPU architecture (repeatable; default: all)",
    )
    return Parents(matrix=matrix, output=output, cells=cells)


Shared = Literal["matrix", "cells", "output"]


class Command(Protocol):
    """A module of release.commands: its docstring's first paragraph is the description
    `release NAME --help` shows, and the module's name (`gpu_gate`: `release gpu-gate`) the
    command's."""

    __name__: str
    __doc__: str | None
    HELP: str  # the line in `release --help`
    SHARED: tuple[Shared, ...]  # the shared options it takes, in the order --help lists them

    def add_options(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def add_command(subparsers: Any, command: Command, shared: Parents) -> None:
    """The subcommand `release NAME`: the shared options first, then the command's own."""
    name = command.__name__.rsplit(".", 1)[-1].replace("_", "-")
    description = (command.__doc__ or "").split("\n\n", 1)[0]
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        parents=[getattr(shared, option) for option in command.SHARED],
        help=command.HELP,
        description=description,
    )
    parser.set_defaults(func=command.run)
    command.add_options(parser)


def output_for(args: argparse.Namespace, command: str) -> Output:
    return Output(
        os.environ,
        json_mode=bool(getattr(args, "json", False)),
        json_file=getattr(args, "json_file", None),
        command=command,
    )


def add_output_file(
    parser: argparse.ArgumentParser, option: str, what: str, *, metavar: str = "FILE"
) -> None:
    """`option FILE`, a file the command writes: one it cannot write is refused while the
    command line is parsed, naming `option`; `what` is its help."""
    parser.add_argument(option, type=OutputFile(option), metavar=metavar, help=what)


def add_output_dir(
    parser: argparse.ArgumentParser, option: str, what: str, *, default: Path | None = None
) -> None:
    """`option DIR`, a directory the command writes in: one it cannot create or write in is
    refused while the command line is parsed, naming `option`; `what` is its help."""
    parser.add_argument(option, type=OutputDir(option), default=default, metavar="DIR", help=what)


def add_dist_option(parser: argparse.ArgumentParser, what: str, *, written: bool = False) -> None:
    """`--dist DIR` (default: dist); `what` says what the command reads or writes there;
    a command that writes there (`written`) refuses a DIR it cannot write in."""
    kind = OutputDir("--dist") if written else Path
    parser.add_argument("--dist", type=kind, default=Path("dist"), metavar="DIR", help=what)


def add_index_url_overrides(parser: argparse.ArgumentParser, what: str) -> None:
    """`--index-url NAME=URL`, repeatable, as `parse_overrides` reads it; `what` is its help."""
    parser.add_argument("--index-url", action="append", default=[], metavar="NAME=URL", help=what)


def add_markdown_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--markdown FILE`, which `write_report` writes; `what` is its help."""
    add_output_file(parser, "--markdown", f"{what} (its directory must exist)")


def write_report(
    out: Output, document: Mapping[str, Any], markdown: str, file: Path | None
) -> None:
    """A command's result: its JSON document, then its Markdown in `file` (--markdown) when
    given and in the GitHub step summary."""
    out.document(document)
    if file is not None:
        write_atomic(file, markdown.encode())
    out.summary(markdown)


def add_toolchain_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cuda-home",
        type=Path,
        default=None,
        metavar="DIR",
        help="use this CUDA toolkit (bin/nvcc) instead of the PyPI toolchain "
        "(default: $CUDA_HOME if set)",
    )
    add_output_dir(
        parser,
        "--cache-dir",
        "toolchains, device code and wheels cache "
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


def load(path: Path, args: argparse.Namespace | None = None) -> Matrix:
    """The matrix at `path`; a project whose pyproject.toml has no static name and version
    is named by its build backend (once per commit, in the cache of --cache-dir)."""
    given = getattr(args, "cache_dir", None)
    cache = Path(given) if given is not None else None
    return load_matrix(path, asking_the_backend(cache, dict(os.environ)))


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
