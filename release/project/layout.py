"""What `release init` reads of a repository besides its build files (`read_layout`, the
edge; nothing is run): the shell scripts at its root and in scripts/, the subdirectories
whose pyproject.toml names a distribution, the one a script stages (release.project.staging)
with its own build files and version file, the native code setup.py and that script
build (release.project.native) with the texts of the translation units they name, and the
package data that ships CUDA headers. Every read is bounded; a file too big to be a build
script or a source is left out.
"""

from __future__ import annotations

import os
import posixpath
from collections import deque
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path

from release.project.files import (
    SETUP_PY,
    ProjectFiles,
    naming,
    read_project_files,
    read_version_file,
    reading,
)
from release.project.localversion import LocalVersion, local_version
from release.project.native import (
    NativeBuild,
    merged,
    native_of_script,
    native_of_setup_py,
    quoted_includes,
)
from release.project.places import Place, Said
from release.project.pyproject import PYPROJECT, read_pyproject
from release.project.staging import (
    Script,
    Staged,
    Subproject,
    staged_distribution,
    version_file_candidates,
)

MAX_TEXT = 1 << 20  # a build script or a translation unit is well under 1 MiB
MAX_SCRIPTS = 40
MAX_UNITS = 40
MAX_HEADERS = 400  # the project's own headers followed from its units
MAX_GLOBBED = 5000  # files looked at per package-data pattern
CUDA_SOURCES = (".cuh", ".cu")
# directories that hold other projects' code or the build's output, never the one published
NOT_PUBLISHED = frozenset(
    {"third-party", "third_party", "3rdparty", "external", "vendor", "build", "dist", "tests",
     "test", "docs", "examples", "benchmarks", "node_modules"}
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Layout:
    native: NativeBuild  # setup.py's and the staging script's, together
    units: tuple[tuple[str, str], ...] = ()  # (path, text) of each named unit that is there
    # (path, text, the file that includes it) of the project's own headers the units reach
    # through `#include "..."`, each beside the file that names it
    headers: tuple[tuple[str, str, str], ...] = ()
    cuda_headers: tuple[Said, ...] = ()  # package-data patterns that match a .cuh or .cu file
    staged: Staged | None = None
    staged_files: ProjectFiles | None = None  # the staged subdirectory's build files
    version: Said | None = None  # its version file, read
    staged_above: Staged | None = None  # a script above this directory stages it
    local_version: LocalVersion = field(default_factory=LocalVersion)  # setup.py version label


def read_layout(files: ProjectFiles) -> Layout:
    """The layout of the project in `files.directory` (see the module doc)."""
    root = files.directory
    scripts = _scripts(root)
    subprojects = _subprojects(root)
    exists = frozenset(c for c in version_file_candidates(subprojects) if (root / c).is_file())
    said = naming(reading(files)).name
    staged = staged_distribution(said.value if said else None, subprojects, scripts, exists)
    builds = [native_of_setup_py(files.text(SETUP_PY) or "", SETUP_PY)]
    builds += [
        native_of_script(s.text, s.path) for s in scripts if staged and s.path == staged.script
    ]
    native = merged(builds)
    staged_files = read_project_files(root / staged.directory) if staged else None
    patterns = list(native.package_data)
    staged_pyproject = staged_files.pyproject if staged_files else None  # read with them
    if staged is not None and staged_pyproject is not None:
        staged_data = staged_pyproject.package_data
        patterns += [replace(d, place=_under(staged.directory, d.place)) for d in staged_data]
    version = None
    if staged is not None and staged.version_file is not None:
        path = root / staged.version_file
        version = read_version_file(path, os.path.relpath(path, root / staged.directory))
    units = _units(root, native)
    return Layout(
        native=native,
        units=tuple(units),
        headers=tuple(_headers(root, units)),
        cuda_headers=tuple(p for p in patterns if _ships_cuda(root, p.value or "")),
        staged=staged,
        staged_files=staged_files,
        version=version,
        staged_above=_staged_above(root, files),
        local_version=local_version(files.text(SETUP_PY) or "", SETUP_PY),
    )


def _under(directory: str, place: Place) -> Place:
    return Place(file=f"{directory}/{place.file}", line=place.line)


def _text(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_TEXT:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _scripts(root: Path) -> list[Script]:
    found = sorted([*root.glob("*.sh"), *root.glob("scripts/*.sh")])
    out = []
    for path in found[:MAX_SCRIPTS]:
        text = _text(path)
        if text is not None:
            out.append(Script(path=path.relative_to(root).as_posix(), text=text))
    return out


def _subprojects(root: Path) -> list[Subproject]:
    out = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        if directory.name.startswith(".") or directory.name in NOT_PUBLISHED:
            continue
        text = _text(directory / PYPROJECT)
        if text is not None:
            out.append(Subproject(directory=directory.name, pyproject=read_pyproject(text)))
    return out


def _units(root: Path, native: NativeBuild) -> list[tuple[str, str]]:
    out = []
    for unit in native.units[:MAX_UNITS]:
        text = _text(root / (unit.value or ""))
        if text is not None:
            out.append((unit.value or "", text))
    return out


def _headers(root: Path, units: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The project's own headers the units include, and those they include, breadth first
    (each once; a name that leaves the repository or is not a file is passed over)."""
    seen = {path for path, _ in units}
    queue = deque(units)
    out: list[tuple[str, str, str]] = []
    while queue and len(out) < MAX_HEADERS:
        path, text = queue.popleft()
        for name in quoted_includes(text):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), name))
            if target in seen or target.startswith("../") or posixpath.isabs(target):
                continue
            seen.add(target)
            header = _text(root / target)
            if header is not None:
                out.append((target, header, path))
                queue.append((target, header))
    return out


def _ships_cuda(root: Path, pattern: str) -> bool:
    """Whether a package-data pattern, under the root, matches a CUDA header or source."""
    if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
        return False
    try:
        matched = islice(root.glob(pattern), MAX_GLOBBED)
        return any(p.suffix in CUDA_SOURCES and p.is_file() for p in matched)
    except (OSError, ValueError):
        return False


def _staged_above(root: Path, files: ProjectFiles) -> Staged | None:
    """Where the project is a subdirectory that a script of the directory above (or of the
    repository's root) stages (`release init sgl_deep_gemm`): that script's staging, with
    the subdirectory's path from there."""
    pyproject = reading(files).pyproject  # read once: read_layout asked it already
    if not files.text(PYPROJECT) or pyproject is None:
        return None
    top = next((p for p in (root, *root.parents) if (p / ".git").exists()), root.parent)
    for above in dict.fromkeys([root.parent, top]):
        if above == root or above not in root.parents:
            continue
        sub = Subproject(directory=root.relative_to(above).as_posix(), pyproject=pyproject)
        exists = frozenset(c for c in version_file_candidates([sub]) if (above / c).is_file())
        staged = staged_distribution(None, [sub], _scripts(above), exists)
        if staged is not None:
            return staged
    return None
