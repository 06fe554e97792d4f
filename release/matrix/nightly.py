"""The nightly channel of matrix.yaml: its destination (one that can hold the channel: an
s3 one), its retention keys, and what a commit's nightly builds.

A nightly is the release matrix built from one commit under a PEP 440 dev version computed
from that commit alone (`X.Y.Z.devN`, N the committer time), so every runner gives the same
version, the same filenames and, with SOURCE_DATE_EPOCH from the same commit, the same
bytes; each variant keeps its local label (`X.Y.Z.devN+cu129`). Every cell of a nightly goes
to the channel's s3 destination, whatever destination the release sends it to.

Pure: the rules report to the document loader (release.matrix.load runs them), and
`nightly_matrix` turns a validated matrix and a commit into the matrix that commit's
nightly builds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from packaging.version import Version

from release.errors import ConfigError, shown
from release.matrix.compilecache import with_slash
from release.matrix.destination import Destination
from release.matrix.model import DEFAULT_KEEP, Commit, Matrix, Nightly
from release.matrix.spec import NightlySpec
from release.yamlspec import DocumentLoader, join_path

MIN_KEEP = 2  # the commit /nightly/ held before this one is still being downloaded from
MAX_KEEP = 10_000
NIGHTLY_DIR = "nightly/"
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
_KEY = re.compile(r"^[A-Za-z0-9._-][A-Za-z0-9._/-]*$")


def nightly_version(version: Version, commit_time: int) -> Version:
    """`version` with `.devN`, N the commit's time: 0.1.1 -> 0.1.1.dev1733212345; a pre- or
    post-release part stays (0.2.0rc1 -> 0.2.0rc1.dev1733212345), an earlier dev part and
    a local label go."""
    pre = "".join(str(part) for part in version.pre) if version.pre else ""
    post = f".post{version.post}" if version.post is not None else ""
    return Version(f"{version.base_version}{pre}{post}.dev{commit_time}")


def commit_problem(commit: Commit) -> str | None:
    """Why `commit` cannot name a nightly, if it cannot."""
    if not _COMMIT_SHA.fullmatch(commit.sha):
        return f"{shown(commit.sha)} is not a full commit id (40 lower-case hex digits)"
    if commit.time <= 0:
        return f"the commit time {commit.time} is not a time after 1970"
    return None


def require_nightly(matrix: Matrix) -> Nightly:
    """The matrix's nightly channel; ConfigError where it has none."""
    if matrix.nightly is None:
        raise ConfigError(
            [f"{matrix.path.name} has no nightly channel"],
            hint="add `nightly: {destination: NAME}` naming an s3 destination (docs/nightly.md)",
        )
    return matrix.nightly


def nightly_matrix(matrix: Matrix, commit: Commit) -> Matrix:
    """The matrix of `commit`'s nightly: the project at its nightly version, every cell
    sent to the channel's destination (once: a cell published to several places sends its
    built copy); ConfigError where the matrix has no channel."""
    nightly = require_nightly(matrix)
    problem = commit_problem(commit)
    if problem is not None:
        raise ConfigError([f"the nightly's commit: {problem}"])
    version = nightly_version(matrix.project.version, commit.time)
    project = replace(matrix.project, version=version)
    destination = nightly.destination
    cells = tuple(
        replace(c, project=project, destination=destination, relabelled=()) for c in matrix.cells
    )
    return replace(matrix, project=project, cells=cells, commit=commit)


# --- The rules. ---


def nightly_channel(
    spec: NightlySpec | None, destinations: Mapping[str, Destination], loader: DocumentLoader
) -> Nightly | None:
    """The `nightly:` section, or None where there is none or it is wrong (reported)."""
    if spec is None:
        return None
    before = len(loader.problems)
    destination = destinations.get(spec.destination)
    if not spec.destination:
        loader.problem("nightly.destination", "required key 'destination' is missing")
    elif spec.destination not in destinations:
        known = ", ".join(n for n, d in destinations.items() if d.channel) or "none"
        loader.problem(
            "nightly.destination",
            f"unknown destination {shown(spec.destination)} (s3 destinations: {known})",
        )
    elif destination is None or destination.channel is None:
        loader.problem(
            "nightly.destination",
            f"{spec.destination!r} is a {destination.kind if destination else '?'} "
            "destination: the nightly channel goes to a `kind: s3` one",
        )
    keep = DEFAULT_KEEP if spec.keep is None else spec.keep
    if not MIN_KEEP <= keep <= MAX_KEEP:
        loader.problem(
            "nightly.keep",
            f"{keep} is outside {MIN_KEEP} to {MAX_KEEP} (at least {MIN_KEEP}: a reader of "
            "the /nightly/ page before the last promotion still downloads its commit's wheels)",
        )
    pins = _keep_list(spec.keep_list or [], loader)
    archive = with_slash(spec.archive_prefix or "archive/")
    for key, value in (("keep-list-object", spec.keep_list_object), ("archive-prefix", archive)):
        if value is not None and (not _KEY.fullmatch(value) or ".." in value.split("/")):
            loader.problem(
                join_path("nightly", key),
                f"{shown(value)}: a key under the prefix (letters, digits and ._-/, "
                "not starting with /)",
            )
    if archive == NIGHTLY_DIR or _COMMIT_SHA.fullmatch(archive.rstrip("/")):
        loader.problem("nightly.archive-prefix", f"{archive!r} is where the channel lives")
    store = destination.channel if destination is not None else None
    if len(loader.problems) > before or store is None:
        return None
    return Nightly(
        destination=store,
        keep=keep,
        keep_list=pins,
        keep_list_object=spec.keep_list_object,
        fallout=spec.fallout or "archive",
        archive_prefix=archive,
    )


def keep_list_problem(text: str) -> str | None:
    """Why `text` cannot name a nightly in a keep-list, if it cannot."""
    try:
        version = Version(text)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return f"{shown(text)} is not a PEP 440 version"
    if version.dev is None:
        return f"{text} is not a nightly version (X.Y.Z.devN)"
    if version.local is not None:
        return f"write {version.public}: one pin keeps every variant of that commit"
    return None


def _keep_list(entries: list[str], loader: DocumentLoader) -> tuple[Version, ...]:
    pins: list[Version] = []
    for index, text in enumerate(entries):
        problem = keep_list_problem(text)
        if problem is not None:
            loader.problem(join_path("nightly.keep-list", index), problem)
            continue
        pins.append(Version(text))
    return tuple(pins)
