"""Options and edges several commands share. The matrix and the toolchain are imported
where a command loads one, so that a command's `--help` loads neither."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release import proc
from release.console import Output
from release.credentials import (
    redact,
    spaced_or_unprintable,
    without_credentials,
    written_url_problem,
)
from release.errors import ConfigError, FileError, shown
from release.fsutil import output_dir_problem

if TYPE_CHECKING:
    from release.matrix import Commit, Matrix


def write_report(
    out: Output, document: Mapping[str, Any], markdown: str, file: Path | None
) -> None:
    """A command's result: its JSON document, then its Markdown in `file` (--markdown) when
    given and in the GitHub step summary."""
    out.document(document)
    if file is not None:
        out.write_file(file, markdown)
    out.summary(markdown)


def load(path: Path, out: Output, *, cache_dir: Path | None = None) -> Matrix:
    """The matrix at `path`. The project's name and version are read from its files; where
    they are computed, its build backend is asked (once per commit, in `cache_dir`: the
    command's --cache-dir, where it has one), and `out` says so, and what that installs,
    before anything is."""
    from release.matrix import load_matrix
    from release.toolchain.projectmeta import asking_the_backend

    return load_matrix(path, asking_the_backend(cache_dir, dict(os.environ), out.note))


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


def checked_variable(
    environ: Mapping[str, str], name: str, problem: Callable[[str], str | None], what: str
) -> str | None:
    """The variable `name` where set (None where unset or empty); a ConfigError naming it
    where `problem` finds it is not `what`: a value from the environment is checked as the
    option it stands in for is."""
    value = environ.get(name)
    if not value:
        return None
    why = problem(value)
    if why is not None:
        raise ConfigError(
            [f"{name}={shown(value)} is not {what} ({why})"],
            hint=f"set {name} to {what}, or unset it",
        )
    return value


def parse_overrides(values: list[str], *, written: bool = False) -> dict[str, str]:
    """`--index-url NAME=URL` options (NAME: a destination or a local label). A URL holds
    no white space or control character; it may hold a private index's credentials, which
    verify sends where they are asked, showing `***`. One `written` into files users install
    from (pins) is held to `written_url_problem`: no credentials, no hash or fragment."""
    out = {}
    problems = []
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            given = redact(repr(value))
            problems.append(f"--index-url {given}: write NAME=URL (NAME: a destination or label)")
            continue
        if spaced_or_unprintable(url):
            problems.append(
                f"--index-url {redact(repr(value))}: the URL holds white space or a control "
                "character"
            )
            continue
        if written and (problem := written_url_problem(url)) is not None:
            problems.append(f"--index-url {redact(repr(value))}: the URL {problem}")
            continue
        out[name] = url if url.endswith("/") or "?" in url else url + "/"  # a query kept whole
    if problems:
        raise ConfigError(problems)
    return out


def head_commit(project: Path, environ: Mapping[str, str]) -> Commit:
    """The commit a nightly of `project` is built from: HEAD (its id and committer time),
    with no change to the project's tracked files; ConfigError otherwise."""
    from release.matrix import Commit

    env = without_credentials(environ)
    done = proc.run(
        ["git", "-C", str(project), "log", "-1", "--format=%H %ct"], env=env, separate_stderr=True
    )
    words = done.output.split()
    if done.returncode != 0 or len(words) != 2 or not words[1].isdigit():
        raise ConfigError(
            [f"{project}: no git commit to build a nightly of"],
            hint="a nightly is a commit's build: run it in a git checkout",
        )
    changed = proc.run(
        ["git", "-C", str(project), "status", "--porcelain", "--untracked-files=no", "--", "."],
        env=env,
        separate_stderr=True,
    )
    if changed.returncode != 0 or changed.output.strip():
        first = changed.output.strip().splitlines()[0] if changed.output.strip() else "?"
        raise ConfigError(
            [f"{project}: the checkout changes tracked files ({first.strip()}), so its wheels "
             f"would not be commit {words[0][:12]}'s"],
            hint="commit or stash the changes: a nightly's version and bytes come from its commit",
        )  # fmt: skip
    return Commit(sha=words[0], time=int(words[1]))


def channel_matrix(matrix: Matrix, channel: str, environ: Mapping[str, str]) -> Matrix:
    """The matrix a command works on: as released, or the nightly of the project's HEAD."""
    if channel != "nightly":
        return matrix
    from release.matrix import nightly_matrix, require_nightly

    require_nightly(matrix)
    return nightly_matrix(matrix, head_commit(matrix.project.path, environ))
