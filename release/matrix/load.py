"""matrix.yaml: validation and expansion into cells.

`load_matrix(path)` is the only entry: it reads the file (and, statically, the kernel
project's build files for its name and version: release.project), checks every rule, and
returns a frozen `Matrix` whose `cells` the rest of the program uses without re-checking
anything. Every problem is reported at once as
`matrix.yaml:LINE:COL: <key path>: <what is wrong> (<remedy>)`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from release.credentials import has_credentials, url_shape_problem
from release.errors import ConfigError, Location, one_line, path_as_given, shown
from release.fsutil import linked_part, undecodable_at
from release.github_names import api_url_problem
from release.matrix.cells import (
    check_excludes,
    check_unused_excludes,
    cuda_versions,
    version_cells,
)
from release.matrix.compilecache import from_spec as compile_cache_from_spec
from release.matrix.compilecache import spec_problems as compile_cache_problems
from release.matrix.destination import (
    INDEX_KINDS,
    KINDS,
    Destination,
    IndexDestination,
    destination_name_problem,
    key_owners,
)
from release.matrix.gitindex import link_indexes
from release.matrix.model import Cell, Matrix, Project
from release.matrix.nightly import nightly_channel
from release.matrix.rules import check_cells, gpu_gate, release_build
from release.matrix.spec import DestinationSpec, MatrixSpec
from release.project import (
    BUILD_FILES,
    Naming,
    naming,
    read_project_files,
    read_version_file,
    reading,
)
from release.yamlspec import (
    MAX_DOCUMENT_BYTES,
    DocumentLoader,
    bounds_problem,
    join_path,
    json_schema,
    load_document,
)

# --- Loading. ---


def read_project(path: Path, version_file: Path | None = None) -> Naming:
    """The kernel project's name and version as its files say them, read statically
    (release.project): literals, or where each is computed; a computed version from a
    prepare step's `version_file`."""
    said = None
    if version_file is not None:
        said = read_version_file(version_file, os.path.relpath(version_file, path))
    try:
        files = read_project_files(path)
    except ConfigError as error:  # a file past its bound, not UTF-8: a problem of `project:`
        return Naming(name=None, version=None, problem="; ".join(error.problems))
    return naming(reading(files), said)


def _version_file(spec: MatrixSpec, root: Path) -> Path | None:
    """The prepare step's version-file, where it names one inside `root` (the rules say
    what is wrong with one that does not)."""
    prepare = spec.build.prepare if spec.build is not None else None
    named = prepare.version_file if prepare is not None else None
    if not named or Path(named).is_absolute() or ".." in Path(named).parts:
        return None
    return root / named


def _version_file_problem(
    version_file: Path, root: Path, matrix: Path, project_dir: Path
) -> str | None:
    """Why release may not write the version over `version_file`: reached through a link,
    or a file release reads its configuration from (matrix.yaml, the project's build files),
    which the version would replace."""
    if link := linked_part(root, version_file):
        return (
            f"is reached through the symbolic link {link.relative_to(root).as_posix()}, "
            "and release reads and writes the version there: name a file of the checkout itself"
        )
    if version_file == matrix.resolve():
        what = f"{matrix.name} itself"
    elif version_file.parent == project_dir and version_file.name in BUILD_FILES:
        what = f"the project's {version_file.name}"
    else:
        return None
    return (
        f"is {what}, which release reads, and writing the version would replace it: name "
        "the file the command reads the version from"
    )


# Names a project whose files compute its name or version (`Naming` says where), given the
# matrix as it would be with a stand-in name and version (which cells it has: a torch
# project's build backend runs beside its pinned torch).
MetadataSource = Callable[[Matrix, Naming], tuple[str, Version]]
PROVISIONAL = ("project", Version("0"))


def parse_yaml(text: str, filename: str) -> object:
    yaml = YAML(typ="rt")
    try:
        too_big = bounds_problem(text, filename)
        if too_big is not None:
            raise ConfigError(
                [too_big],
                hint="a release matrix is a few KB of plain text: fix what the line shows",
            )
        return yaml.load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}" if mark else filename
        message = f"{where}: invalid YAML: {error.problem}"
        location = Location(
            file=filename,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            message=message,
        )
        raise ConfigError([message], locations=[location]) from None
    except ReaderError as error:  # a character YAML allows nowhere, by its offset
        raise _located(filename, text, error.position, _reader_problem(error)) from None
    except YAMLError as error:
        raise ConfigError([f"{filename}: invalid YAML: {one_line(str(error))}"]) from None


def _reader_problem(error: ReaderError) -> str:
    """ruamel's reason, without the name it gives the text (`<unicode string>`)."""
    if isinstance(error.character, int):
        return f"invalid YAML: the character {ascii(chr(error.character))[1:-1]} ({error.reason})"
    return f"invalid YAML: {one_line(str(error.reason))}"


def _located(filename: str, text: str, offset: int, problem: str) -> ConfigError:
    """A ConfigError at the line and column of `text`'s character `offset`."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    message = f"{filename}:{line}:{column}: {problem}"
    return ConfigError([message], locations=[Location(filename, line, column, message)])


def load_matrix(path: Path, metadata: MetadataSource | None = None) -> Matrix:
    """Read and validate a matrix file; raise ConfigError with every problem found.
    Nothing is run: the project's name and version are read from its files. `metadata`
    names a project whose files compute them (release.toolchain.projectmeta asks its build
    backend); without it such a project is an error."""
    named = path_as_given(str(path))  # --matrix's value: one line, bounded
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block, /dev/zero never end
            raise ConfigError([f"{named}: not a regular file"], hint="give the matrix file")
        with path.open("rb") as stream:
            data = stream.read(MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise ConfigError(
                [f"{named}: larger than {MAX_DOCUMENT_BYTES // 1024} KiB (a matrix is a few KB)"]
            )
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = undecodable_at(error)
        message = f"{path.name}:{line}:{column}: not UTF-8 (the byte 0x{data[error.start]:02x})"
        raise ConfigError(
            [message], locations=[Location(str(path), line, column, message)]
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            [f"{named}: no such file"],
            hint="run from the release's root directory or pass --matrix PATH",
        ) from None
    except OSError as error:  # its str() would name the path again, whole
        reason = error.strerror or type(error).__name__
        raise ConfigError([f"{named}: cannot read: {reason}"]) from None
    except ValueError as error:  # a NUL in the path
        raise ConfigError([f"{named}: cannot read: {error}"]) from None
    return matrix_from_text(text, path, metadata)


def matrix_from_text(
    text: str,
    path: Path,
    metadata: MetadataSource | None = None,
    *,
    named: tuple[str, Version] | None = None,
) -> Matrix:
    document = parse_yaml(text, path.name)
    spec, loader = load_document(MatrixSpec, document)
    project: Project | None = None
    if spec is not None:
        try:
            project_dir = (path.parent / spec.project).resolve()
        except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop (Python 3.11)
            loader.problem("project", f"{shown(spec.project)} does not resolve: {error}")
            spec = None
    if spec is not None:
        if named is None:
            root = path.parent.resolve()
            version_file = _version_file(spec, root)
            if version_file is not None and (
                problem := _version_file_problem(version_file, root, path, project_dir)
            ):
                loader.problem("build.prepare.version-file", problem)
                version_file = None
            said = read_project(project_dir, version_file)
            named = said.static
            if said.problem is not None:
                where = "build.prepare.version-file" if said.in_version_file else "project"
                loader.problem(where, said.problem)
            elif named is None and loader.problems:
                pass  # the build backend is not asked of a matrix already refused
            elif named is None and metadata is not None:
                provisional = matrix_from_text(text, path, named=PROVISIONAL)
                return matrix_from_text(text, path, named=metadata(provisional, said))
            elif named is None:
                loader.problem(
                    "project",
                    f"{said.unsaid(project_dir)} (write them as literals in pyproject.toml's "
                    "[project] or setup.py, or let a command that asks the build backend read "
                    "this matrix)",
                )
        if named is not None:
            project = Project(name=named[0], version=named[1], path=project_dir)
    matrix = None
    if spec is not None and project is not None:
        matrix = _validate(spec, project, path, loader)
    if loader.problems or matrix is None:
        ordered = sorted(
            loader.problems,
            key=lambda p: (p.position.line, p.position.column) if p.position else (0, 0),
        )
        raise ConfigError(
            [p.render(path.name) for p in ordered],
            hint=f"fix {path.name}; `release matrix --schema` prints what it accepts",
            locations=[
                Location(
                    file=str(path),
                    line=p.position.line if p.position else None,
                    column=p.position.column if p.position else None,
                    message=p.render(path.name),
                )
                for p in ordered
            ],
        )
    return matrix


SCHEMA_ID = "https://raw.githubusercontent.com/k3-project/k3-kernels/main/schema/matrix.schema.json"


def matrix_json_schema() -> dict[str, Any]:
    """The JSON Schema of matrix.yaml (draft 2020-12, ECMA-262 patterns), generated from
    the spec dataclasses; schema/matrix.schema.json is this, kept in sync by a test."""
    schema = json_schema(MatrixSpec)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "matrix.yaml",
        **schema,
    }


# --- Rules. ---


def _shared_problems(name: str, spec: DestinationSpec, loader: DocumentLoader) -> None:
    """Keys of another kind, URLs that are not URLs, limits that are not positive."""
    path = join_path("destinations", name)
    if problem := destination_name_problem(name):
        loader.problem(path, problem)
    for key, kinds in key_owners().items():
        if spec.kind not in kinds and getattr(spec, key) is not None:
            yaml_key = key.replace("_", "-")
            named = ", ".join(kinds[:-1]) + f" and {kinds[-1]}" if len(kinds) > 1 else kinds[0]
            loader.problem(
                join_path(path, yaml_key),
                f"{yaml_key!r} is only for {named} destinations (remove it)",
            )
    for key in ("repository_url", "index_url"):
        url = getattr(spec, key)
        if url is not None and (problem := url_shape_problem(url)):
            loader.problem(join_path(path, key.replace("_", "-")), f"{shown(url)} {problem}")
        elif url is not None and has_credentials(url):
            loader.problem(
                join_path(path, key.replace("_", "-")),
                f"{shown(url)} holds credentials, which dist/manifest.json would hold too "
                "(give them in TWINE_* or a netrc)",
            )
    if spec.api_url is not None and api_url_problem(spec.api_url):
        loader.problem(
            join_path(path, "api-url"),
            f"{shown(spec.api_url)} is not a GitHub API base URL ({api_url_problem(spec.api_url)})",
        )
    for key in ("max_file_size_mib", "max_project_size_gib", "max_growth_percent"):
        value = getattr(spec, key)
        if value is not None and value <= 0:
            loader.problem(join_path(path, key.replace("_", "-")), "must be a positive number")


def _destinations(
    specs: Mapping[str, DestinationSpec], loader: DocumentLoader
) -> tuple[dict[str, Destination], dict[str, IndexDestination]]:
    """The destinations wheels go to, and the git indexes that list some of them."""
    out: dict[str, Destination] = {}
    indexes: dict[str, IndexDestination] = {}
    for name, spec in specs.items():
        _shared_problems(name, spec, loader)
        index_kind = INDEX_KINDS.get(spec.kind)
        if index_kind is not None:
            indexes[name] = index_kind.load(name, spec, loader)
            continue
        destination = KINDS[spec.kind].load(name, spec, loader)
        if destination is not None:
            out[name] = destination
    return link_indexes(out, indexes, specs, loader)


def _validate(
    spec: MatrixSpec, project: Project, path: Path, loader: DocumentLoader
) -> Matrix | None:
    destinations, indexes = _destinations(spec.destinations, loader)
    release_build(spec, loader, matrix_name=path.name)
    excludes = spec.exclude or []
    if not spec.cuda:
        loader.problem("cuda", "the matrix is empty: add at least one CUDA version")
    versions = cuda_versions(spec.cuda, loader)
    check_excludes(excludes, spec.cuda, loader)
    used_excludes: set[int] = set()
    cells: list[Cell] = []
    for key, cuda in versions.items():
        cells += version_cells(
            spec=spec,
            project=project,
            key=key,
            cuda=cuda,
            destinations=destinations,
            indexes=indexes,
            used=used_excludes,
            loader=loader,
        )
    check_unused_excludes(excludes, used_excludes, spec.cuda, loader)
    check_cells(cells, {v: k for k, v in versions.items()}, path.name, loader)
    if not cells and spec.cuda and not loader.problems:
        loader.problem("cuda", "the matrix is empty: every cell is excluded")
    gate = gpu_gate(spec, loader, cells)
    if spec.compile_cache is not None:
        for key, message in compile_cache_problems(spec.compile_cache):
            loader.problem(join_path("compile-cache", key), message)
    return Matrix(
        path=path,
        project=project,
        cells=tuple(cells),
        destinations=destinations,
        indexes=indexes,
        gpu_gate=gate,
        compile_cache=compile_cache_from_spec(spec.compile_cache, path.parent),
        nightly=nightly_channel(spec.nightly, destinations, loader),
    )
