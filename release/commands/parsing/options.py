"""The argparse types of every numeric, output-path and GitHub-address option, in one place.

A number out of range, or a GitHub repository or API URL that is not one
(release.github_names), is argparse's usage error (exit 2), naming the option and what it
takes. An output path that cannot be written is a FileError (exit 8) naming the option and
the path as given, raised while the command line is parsed: before anything runs, so that
nothing is half-done when it fails.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from release.credentials import has_credentials, url_shape_problem
from release.errors import FileError, as_given, path_as_given, shown
from release.fsutil import output_dir_problem
from release.github_names import api_url_problem, repository_problem

PATH_HINT = "give a path whose directory exists and is writable"

# Off while the command line is parsed again to find a usage error (an unknown option) that
# a path's FileError, raised as argparse converts it, came before: the usage error is said.
_PATHS_CHECKED: ContextVar[bool] = ContextVar("paths_checked", default=True)


@contextmanager
def paths_unchecked() -> Iterator[None]:
    """The output-path types take any path, for as long as the block runs."""
    token = _PATHS_CHECKED.set(False)
    try:
        yield
    finally:
        _PATHS_CHECKED.reset(token)


@dataclass(frozen=True)
class WholeNumber:
    """argparse type: a whole number from `least` to `most`."""

    least: int
    most: int

    @property
    def accepted(self) -> str:
        return f"{self.least} to {self.most}"

    def __call__(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not self.least <= value <= self.most:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {self.accepted}, got {as_given(text)}"
            )
        return value


@dataclass(frozen=True)
class Seconds:
    """argparse type: a number of seconds above 0 and at most `most` (not nan or inf)."""

    most: float

    @property
    def accepted(self) -> str:
        return f"more than 0, at most {self.most:g}"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value <= self.most:  # nan compares false: refused with the rest
            raise argparse.ArgumentTypeError(
                f"must be a positive number of seconds, at most {self.most:g}, got {as_given(text)}"
            )
        return value


def output_file_problem(path: Path) -> str | None:
    """Why `path` cannot take a file written atomically (a temporary file beside it, then
    renamed over it), or None."""
    try:
        return _output_file_problem(path)
    except OSError as error:  # a name too long, a loop of links
        return f"cannot be written: {error.strerror or type(error).__name__}"


def _output_file_problem(path: Path) -> str | None:
    if path.is_dir():
        return "is a directory, not a file"
    if path.exists() and not path.is_file():
        return "is not a regular file (for stdout, use --json)"
    parent = path.parent
    if not parent.exists():  # the help says it must: a typo in it would lose the file
        return f"its directory {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its directory {parent} is not writable by this user"
    return None


def github_repository(text: str) -> str:
    """argparse type: a GitHub repository, OWNER/REPO."""
    problem = repository_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not OWNER/REPO ({problem})")
    return text


def github_api_url(text: str) -> str:
    """argparse type: a GitHub REST API base URL (https://api.github.com,
    https://HOST/api/v3)."""
    problem = api_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a GitHub API base URL ({problem})")
    return text


def public_url(text: str) -> str:
    """argparse type: an http(s) URL that the files written for users name (the index's
    pages, published.json, requirement files): no credential, which they would hold too."""
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not an http(s) URL")
    if has_credentials(text):
        raise argparse.ArgumentTypeError(
            f"{shown(text)} holds credentials, which the files written would hold too"
        )
    return text


def asked_url(text: str) -> str:
    """argparse type: an http(s) URL the command only asks (`nccl --check`'s index), never
    writes: a private index's credentials may be in it (shown as ***), but not white space,
    a control character or a port that is no number."""
    problem = url_shape_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{shown(text)} {problem}")
    return text


@dataclass(frozen=True)
class ExistingDir:
    """argparse type: a directory that exists and that the command writes in (`release
    init`'s project), named by `option` in its error."""

    option: str

    def __call__(self, text: str) -> Path:
        path = Path(text)
        problem = None
        if not _PATHS_CHECKED.get():
            pass
        elif not path.exists():
            problem = "no such directory"
        elif not path.is_dir():
            problem = "is a file, not a directory"
        elif not os.access(path, os.W_OK | os.X_OK):
            problem = "not writable by this user"
        if problem is not None:
            raise FileError(
                f"{self.option} {path_as_given(text)}: {problem}",
                hint="give the kernel project's directory",
            )
        return path


@dataclass(frozen=True)
class OutputFile:
    """argparse type: a file the command writes, named by `option` in its error."""

    option: str

    def __call__(self, text: str) -> Path:
        path = Path(text)
        problem = output_file_problem(path) if _PATHS_CHECKED.get() else None
        if problem is not None:
            raise FileError(f"{self.option} {path_as_given(text)}: {problem}", hint=PATH_HINT)
        return path


@dataclass(frozen=True)
class OutputDir:
    """argparse type: a directory the command writes in (created if missing), named by
    `option` in its error."""

    option: str

    def __call__(self, text: str) -> Path:
        path = Path(text)
        problem = output_dir_problem(path) if _PATHS_CHECKED.get() else None
        if problem is not None:
            raise FileError(
                f"{self.option} {path_as_given(text)}: {problem}",
                hint="give a directory, or a path where one can be created",
            )
        return path
