"""Read the kernel project in DIR statically (setup.py with ast, pyproject.toml, setup.cfg,
CMakeLists.txt; nothing is run, and none of its files is changed) and write a commented
matrix.yaml there and the release workflow that calls the tool's reusable one
(.github/workflows/release.yml at the repository's root, or the name --workflow gives).
It detects the build backend, the project's own SM list, a torch project's py_limited_api
floor or Python list, its torch (pinned to the newest exact version the index has that its
build requirement allows: one small request) and its force-CUDA switch, each with the file
and line it read; it names what must change before the project builds, and what it could
not decide.

`release init`: a commented matrix.yaml and the release workflow for a kernel project.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release.commands.parsing import arguments
from release.commands.parsing.options import ExistingDir
from release.console import Output
from release.credentials import secret_values
from release.defaults import CALLER_WORKFLOW, PYPI_SIMPLE

if TYPE_CHECKING:
    from release.init.detect import Note
    from release.init.run import InitOutcome

_WORKFLOW_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,94}\.ya?ml")
HELP = "write a commented matrix.yaml and the release workflow for a kernel project"
SHARED: tuple[arguments.Shared, ...] = ("output",)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        type=ExistingDir("DIR"),
        default=Path("."),
        metavar="DIR",
        help="the kernel project's directory (default: .)",
    )
    parser.add_argument(
        "--force", action="store_true", help="write over an existing matrix.yaml and workflow"
    )
    parser.add_argument(
        "--workflow",
        type=workflow_name,
        default=CALLER_WORKFLOW,
        metavar="NAME",
        help="the caller workflow's file name in .github/workflows, beside a release.yml of "
        f"the project's own (default: {CALLER_WORKFLOW})",
    )
    parser.add_argument(
        "--torch-index",
        type=index_url,
        default=None,
        metavar="URL",
        help="a torch project's torch comes from this simple index, and matrix.yaml says so "
        f"(torch-index); its newest allowed torch is pinned (default: {PYPI_SIMPLE})",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="ask no index: a torch project's torch pin is left a TODO in matrix.yaml",
    )
    parser.add_argument(
        "--pypi-token-secret",
        type=secret_name,
        default=None,
        metavar="NAME",
        help="the workflow publishes to PyPI with the API token in this repository secret "
        "(default: PyPI's trusted publishing, no token)",
    )
    parser.add_argument(
        "--destination-token-secret",
        type=destination_secret_name,
        default=None,
        metavar="NAME",
        help="a destination in another repository (matrix.yaml's token-secret: NAME) is "
        "written with the token in this repository secret: the workflow passes it to the "
        "publish action and to the jobs that read the destinations (default: the job's own "
        "token only)",
    )


def secret_name(text: str) -> str:
    """argparse type of --pypi-token-secret: a GitHub secret's name."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) or text.upper().startswith("GITHUB_"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a secret's name (letters, digits and _, not starting with a "
            "digit or GITHUB_)"
        )
    return text


def workflow_name(text: str) -> str:
    """argparse type of --workflow: a file name GitHub runs from .github/workflows."""
    if not _WORKFLOW_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a workflow file name (letters, digits, '.', '_' and '-', "
            "ending in .yml or .yaml, at most 100 characters)"
        )
    return text


def destination_secret_name(text: str) -> str:
    """argparse type of --destination-token-secret: a name matrix.yaml's token-secret
    takes."""
    from release.matrix.gitindex import token_secret_problem

    problem = token_secret_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def index_url(text: str) -> str:
    """argparse type of --torch-index: an http(s) URL, kept exactly as given (matrix.yaml
    holds it), with no whitespace, control character or credential. The message never
    quotes the URL: it may hold the credential."""
    from release.init.values import index_url_problem

    problem = index_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def run(args: argparse.Namespace, out: Output) -> int:
    from release.init.run import InitSettings, init_project

    outcome = init_project(
        InitSettings(
            directory=args.directory,
            force=args.force,
            workflow=args.workflow,
            torch_index=args.torch_index,
            offline=args.offline,
            pypi_token_secret=args.pypi_token_secret,
            destination_token_secret=args.destination_token_secret,
            hidden=secret_values(os.environ),
        )
    )
    out.document(init_json(outcome))
    print_outcome(out, outcome)
    return 0


def init_json(outcome: InitOutcome) -> dict[str, Any]:
    decision = outcome.decision
    return {
        "directory": str(outcome.directory),
        "backend": decision.backend,
        "written": [
            {"path": str(w.path), "what": w.what, "replaced": w.replaced} for w in outcome.written
        ],
        "detected": [{"key": f.key, "value": f.value, "source": f.source} for f in decision.found],
        "changes": [_note(n) for n in decision.changes],
        "undecided": [_note(n) for n in decision.undecided],
    }


def _note(note: Note) -> dict[str, str]:
    return {"place": note.place, "text": note.text, "fix": note.fix}


def print_outcome(out: Output, outcome: InitOutcome) -> None:
    decision = outcome.decision
    for written in outcome.written:
        verb = "replaced" if written.replaced else "wrote"
        out.line(f"{verb} {_shown(written.path, outcome.directory)}: {written.what}")
    out.table(
        ["key", "value", "from"],
        [[f.key, f.value, f.source] for f in decision.found],
        f"detected in {outcome.directory}",
    )
    for title, notes in (
        ("needs a change before it builds", decision.changes),
        ("not decided, check", decision.undecided),
    ):
        if notes:
            out.line(f"{title}:")
        for note in notes:
            where = f"{note.place}: " if note.place else ""
            out.line(f"  {where}{note.text}" + (f"\n    fix: {note.fix}" if note.fix else ""))
    matrix = command_path(_shown(outcome.written[0].path, Path.cwd()))
    out.line(f"next: review {matrix}, then `release build --dry-run --matrix {matrix}`")


def command_path(path: str) -> str:
    """`path` as a shell command line names it for copying: quoted where it needs it
    (shlex.quote), and never read as an option (`-x` is written `./-x`)."""
    return shlex.quote(f"./{path}" if path.startswith("-") else path)


def _shown(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base.resolve()))
    except ValueError:
        return str(path)
