"""The parser side that every command shares: the shared options (--matrix, --json, the
cell selection), the options several commands take, and how a command module is registered
as `release NAME`.

Only argparse and the option types are imported here: `release --version` and `--help`
build their parsers from this module alone.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, TypeVar

from release.commands.parsing.options import OutputDir, OutputFile, github_api_url
from release.credentials import redact
from release.errors import ConfigError, path_as_given
from release.targets import ARCHES

if TYPE_CHECKING:
    from release.console import Output

T = TypeVar("T")


def options_from(kind: type[T], args: argparse.Namespace, **given: Any) -> T:
    """The dataclass `kind` of what the command line says: each of its fields that the
    parser has, by its name (every option's dest is the field's name, as twine's settings
    take them), then `given` over them."""
    names = {field.name for field in dataclasses.fields(kind) if field.init}  # type: ignore[arg-type]
    taken = {name: value for name, value in vars(args).items() if name in names}
    return kind(**{**taken, **given})


class UsageError(SystemExit):
    """A command line argparse refuses: exit 2, with the usage and one line, which `main`
    prints (and puts in the --json document). A SystemExit, as argparse's own, for callers
    of `parse_args` other than `main`."""

    def __init__(self, message: str, *, usage: str, prog: str) -> None:
        super().__init__(2)
        self.message = message
        self.usage = usage
        self.prog = prog

    def lines(self) -> list[str]:
        return [*self.usage.splitlines(), f"{self.prog}: error: {self.message}"]


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors echo no credential: every value quoted in one
    (`invalid choice: 'redis://:SECRET@h'`, a type's message) has its URLs redacted, and
    the error is raised (`UsageError`) for `main` to print, not printed here."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(redact(message), usage=self.format_usage(), prog=self.prog)


@dataclass(frozen=True)
class Parents:
    """Options several commands share: `matrix` (--matrix), `output` (--json, --json-file),
    `cells` (--cuda, --arch: which cells of the matrix)."""

    matrix: argparse.ArgumentParser
    output: argparse.ArgumentParser
    cells: argparse.ArgumentParser


class _Given(argparse.Action):
    """Stores the value, and that it was given (`matrix_given`): a command may hold what it
    reads to a matrix named on the command line that it would not look for by default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def parents() -> Parents:
    matrix = Parser(add_help=False)
    matrix.add_argument(
        "--matrix",
        type=Path,
        default=Path("matrix.yaml"),
        action=_Given,
        metavar="PATH",
        help="the release matrix (default: ./matrix.yaml)",
    )
    matrix.set_defaults(matrix_given=False)
    output = Parser(add_help=False)
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
    cells = Parser(add_help=False)
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

    def run(self, args: argparse.Namespace, out: Output) -> int:
        """What the command does; `out` is where all it shows goes, its one --json document
        included (`Output.document`), which `main` writes when the command ends."""
        ...


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


def add_github_api_url_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--github-api-url URL`, checked as a GitHub REST API base; `what` is its help."""
    parser.add_argument("--github-api-url", type=github_api_url, metavar="URL", help=what)


def add_markdown_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--markdown FILE`, which `write_report` writes; `what` is its help."""
    add_output_file(parser, "--markdown", f"{what} (its directory must exist)")


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


CHANNELS = ("release", "nightly")


def add_channel_option(parser: argparse.ArgumentParser, what: str) -> None:
    """`--channel release|nightly` (default release); `what` says what nightly means here."""
    parser.add_argument(
        "--channel",
        choices=CHANNELS,
        default="release",
        help=f"release (default), or nightly: {what}",
    )


def json_file_problem(args: argparse.Namespace) -> ConfigError | None:
    """A --json-file that is the file the command reads its configuration from (--matrix):
    the document written at the end would replace the matrix. None where it is another."""
    json_file, matrix = getattr(args, "json_file", None), getattr(args, "matrix", None)
    if json_file is None or matrix is None:
        return None
    try:
        same = Path(json_file).resolve() == Path(matrix).resolve()
    except (OSError, RuntimeError):  # a name too long, a loop: the command says so itself
        return None
    if not same:
        return None
    return ConfigError(
        [
            f"--json-file {path_as_given(str(json_file))}: is the matrix the command reads "
            "(--matrix), which the document would replace"
        ],
        hint="name another file for the JSON document",
    )
