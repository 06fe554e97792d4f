"""Which distribution a repository publishes when it is not the root's: a subdirectory's
pyproject.toml that names another project, staged by a script at the root (sgl-project's
DeepGEMM: `build_sgl_deep_gemm.sh` copies `sgl_deep_gemm/pyproject.toml`, the package and
its headers into build/, writes the version there from `sgl_deep_gemm/VERSION`, compiles
`_C.so`, then builds build/). Read from the script's text, never run: where it copies the
subdirectory's pyproject.toml to (its output, with the script's own variables put in),
the file it reads the version from, and the lines that build or install on their own.
Pure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from packaging.utils import canonicalize_name

from release.project.places import Place, Said
from release.project.pyproject import PyProject

_ASSIGN = re.compile(r"^\s*(?:export\s+|readonly\s+|local\s+)?([A-Za-z_]\w*)=(\S.*)$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
_SCRIPT_DIR = re.compile(r"\b(dirname|realpath|pwd|readlink)\b|\$\{?PWD\b")
_BUILDS = re.compile(r"(-m\s+build\b|\bpip3?\s+wheel\b|\bsetup\.py\s+bdist_wheel\b)")
_INSTALLS = re.compile(r"\bpip3?\s+install\b")
PREPARING = "RELEASE_PREPARE"  # what release's prepare step sets (release.building.preparestep)


@dataclass(frozen=True, kw_only=True)
class Subproject:
    directory: str  # relative to the root: `sgl_deep_gemm`
    pyproject: PyProject


@dataclass(frozen=True, kw_only=True)
class Script:
    path: str  # relative to the root: `build_sgl_deep_gemm.sh`
    text: str


@dataclass(frozen=True, kw_only=True)
class Staged:
    """The published distribution: a subdirectory staged by a script (paths relative to
    the root)."""

    directory: str
    name: Said  # its [project] name, at its place under the root
    script: str
    copies: Place  # where the script copies the pyproject.toml
    output: str | None  # where it copies it to
    output_unfit: str | None = None  # why where it copies it to cannot be the output
    version_file: str | None  # the file it reads the version from
    version_from: Said | None  # the staged pyproject's dynamic version file
    builds: Place | None = None  # a line that builds a wheel itself
    installs: Place | None = None  # a line that installs into its Python

    @property
    def command(self) -> str:
        return shlex.join(["bash", self.script])


def staged_distribution(
    root_name: str | None,
    subprojects: Sequence[Subproject],
    scripts: Sequence[Script],
    exists: frozenset[str],
) -> Staged | None:
    """The subdirectory distribution, named otherwise than the root's (`root_name`), that
    exactly one script stages by copying its pyproject.toml; `exists` says which of the
    candidate version files are there."""
    root = canonicalize_name(root_name) if root_name else None
    found: list[Staged] = []
    for sub in subprojects:
        name = sub.pyproject.name
        if name is None or name.value is None or canonicalize_name(name.value) == root:
            continue
        for script in scripts:
            staged = _staged_by(sub, script, exists)
            if staged is not None:
                found.append(staged)
    return found[0] if len(found) == 1 else None


def _staged_by(sub: Subproject, script: Script, exists: frozenset[str]) -> Staged | None:
    copied = f"{sub.directory}/pyproject.toml"
    lines = script.text.splitlines()
    variables = _variables(lines)
    copies = None
    for number, line in enumerate(lines, start=1):
        if copied in line and not line.lstrip().startswith("#") and re.search(r"\bcp\b", line):
            copies = number, line
            break
    if copies is None or sub.pyproject.name is None:
        return None
    number, line = copies
    output, unfit = _destination(line, variables)
    if output is not None and (unfit := _unfit_output(output, sub.directory)) is not None:
        output = None
    name = sub.pyproject.name
    # a script that tests RELEASE_PREPARE (release's prepare step sets it) skips its own
    # build and installs under release
    guarded = any(PREPARING in t and not t.lstrip().startswith("#") for t in lines)
    return Staged(
        directory=sub.directory,
        name=Said(place=_under(sub.directory, name.place), value=name.value),
        script=script.path,
        copies=Place(file=script.path, line=number),
        output=output,
        output_unfit=unfit,
        version_file=_version_file(sub, script.text, exists),
        version_from=sub.pyproject.version_from,
        builds=None if guarded else _first(script, _BUILDS),
        installs=None if guarded else _first(script, _INSTALLS),
    )


def version_file_candidates(subprojects: Sequence[Subproject]) -> list[str]:
    """The files a staging script may read a subdirectory's version from: the name of
    the file its pyproject.toml's dynamic version reads, and VERSION, in the subdirectory."""
    out = []
    for sub in subprojects:
        names = ["VERSION"]
        if sub.pyproject.version_from is not None and sub.pyproject.version_from.value:
            names.insert(0, PurePosixPath(sub.pyproject.version_from.value).name)
        out += [f"{sub.directory}/{n}" for n in dict.fromkeys(names)]
    return out


def _version_file(sub: Subproject, text: str, exists: frozenset[str]) -> str | None:
    """The candidate the script names, else the one that is there."""
    candidates = version_file_candidates([sub])
    named = [c for c in candidates if c in text]
    there = [c for c in candidates if c in exists]
    chosen = named or there
    return chosen[0] if chosen else None


def _variables(lines: Sequence[str]) -> dict[str, str]:
    """The script's `NAME=value` assignments, unquoted; a value computed from the script's
    own directory (`$(dirname "$0")`, `$(pwd)`) is the root, ``."""
    found: dict[str, str] = {}
    for line in lines:
        match = _ASSIGN.match(line)
        if match is None:
            continue
        value = match.group(2).strip()
        if "$(" in value or "`" in value:  # a command's output: the root's, or unknown
            if _SCRIPT_DIR.search(value):
                found[match.group(1)] = _ROOT
            continue
        try:
            words = shlex.split(value, comments=True)
        except ValueError:
            continue
        if len(words) <= 1:
            found[match.group(1)] = words[0] if words else ""
    return found


_MOST_EXPANDED = 4096  # characters of a path a script's variables expand to


def _expand(text: str, variables: Mapping[str, str], depth: int = 0) -> str | None:
    if depth > 8:
        return None
    if not _VARIABLE.search(text):
        return text

    def value(match: re.Match[str]) -> str:
        return variables.get(match.group(1) or match.group(2), "\0")

    expanded = _VARIABLE.sub(value, text)
    if "\0" in expanded or len(expanded) > _MOST_EXPANDED:  # `A=$A$A` a dozen times: a bomb
        return None
    return _expand(expanded, variables, depth + 1)


_ROOT = "\x01"  # what a variable of the script's own directory (the root) expands to


def _destination(line: str, variables: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The directory a `cp ... DEST` line copies to, relative to the root; else None, with
    why it cannot be the output where that is known (None: computed)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None, None
    if len(words) < 3:
        return None, None
    expanded = _expand(words[-1], variables)
    if expanded is None or "$" in expanded or "`" in expanded:
        return None, None
    if expanded.startswith("/"):
        where = expanded.rstrip("/") or "/"
        return None, f"it stages into {where}, an absolute path outside the checkout"
    if expanded.startswith("~"):  # the shell's home directory, not a folder named ~
        where = expanded.rstrip("/")
        return None, f"it stages into {where}, under a home directory outside the checkout"
    expanded = expanded.removeprefix(_ROOT).lstrip("/")
    parts = [p for p in PurePosixPath(expanded).parts if p not in (".", "")]
    if not parts or ".." in parts or _ROOT in expanded:
        return None, None
    return "/".join(parts), None


def _unfit_output(output: str, project: str) -> str | None:
    """Why `output` (relative to the root) cannot be build.prepare's output, which release
    empties before the command and removes after the build."""
    path, sources = PurePosixPath(output), PurePosixPath(project)
    if ".git" in path.parts:
        return f"it stages into {output}, inside .git, git's own directory"
    if path == sources or path in sources.parents:
        return f"it stages into {output}, which holds the project's sources ({project})"
    if path.parts[0] == "dist":
        return f"it stages into {output}, in dist/, where release writes its wheels"
    if output == "matrix.yaml":
        return f"it stages into {output}, the file that declares the release"
    return None


def _first(script: Script, pattern: re.Pattern[str]) -> Place | None:
    for number, line in enumerate(script.text.splitlines(), start=1):
        if not line.lstrip().startswith("#") and pattern.search(line):
            return Place(file=script.path, line=number)
    return None


def _under(directory: str, place: Place) -> Place:
    return Place(file=f"{directory}/{place.file}", line=place.line)
