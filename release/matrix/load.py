"""matrix.yaml: validation and expansion into cells.

`load_matrix(path)` is the only entry: it reads the file (and the kernel project's
pyproject.toml for its name and version), checks every rule, and returns a frozen `Matrix`
whose `cells` the rest of the program uses without re-checking anything. Every problem is
reported at once as `matrix.yaml:LINE:COL: <key path>: <what is wrong> (<remedy>)`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from release.backends.recipe import BuildRecipe, targets_problem
from release.errors import ConfigError, Location, shown
from release.matrix.model import (
    Cell,
    Destination,
    GithubDestination,
    Matrix,
    Project,
    PypiDestination,
    cell_dict,
    nccl_package,
    nccl_requirement,
)
from release.matrix.rules import (
    check_cells,
    check_label,
    check_targets,
    cuda_build,
    gpu_gate,
    release_build,
)
from release.matrix.spec import (
    CudaSpec,
    DestinationSpec,
    ExcludeSpec,
    ManylinuxSpec,
    MatrixSpec,
    PtxSpec,
    VersionSpec,
    WheelSettings,
)
from release.targets import Arch, CudaVersion, GpuTarget
from release.yamlspec import (
    DocumentLoader,
    Problem,
    bounds_problem,
    did_you_mean,
    join_path,
    json_schema,
    load_document,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

T = TypeVar("T")

PYPI_DEFAULT_MAX_MIB = 100
GITHUB_ASSET_MAX_MIB = 2048
# GitHub's rules: an owner is 1-39 letters, digits and single inner hyphens; a repository
# name is 1-100 of letters, digits, '.', '_' and '-', and neither '.' nor '..'.
_OWNER_RE = re.compile(r"^[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}$")
_REPO_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_MIN_MANYLINUX = (2, 17)


# --- Loading. ---


def read_project(path: Path) -> tuple[str, Version] | str:
    """The kernel project's (name, version) from its pyproject.toml, or why not."""
    pyproject = path / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{pyproject} does not exist (point `project` at the kernel project's directory)"
    except (OSError, tomllib.TOMLDecodeError) as error:
        return f"cannot read {pyproject}: {error}"
    table = data.get("project", {})
    name, version = table.get("name"), table.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return f"{pyproject} needs a static [project] name and version"
    try:
        return name, Version(version)
    except InvalidVersion:
        return f"{pyproject}: version {shown(version)} is not PEP 440"


def parse_yaml(text: str, filename: str) -> object:
    yaml = YAML(typ="rt")
    try:
        too_big = bounds_problem(text, filename)
        if too_big is not None:
            raise ConfigError([too_big], hint="a release matrix is a few KB; check the file")
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
    except YAMLError as error:
        raise ConfigError([f"{filename}: invalid YAML: {error}"]) from None


def load_matrix(path: Path) -> Matrix:
    """Read and validate a matrix file; raise ConfigError with every problem found."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [f"{path}: no such file"],
            hint="run from the release's root directory or pass --matrix PATH",
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"{path}: cannot read: {error}"]) from None
    return matrix_from_text(text, path)


def matrix_from_text(text: str, path: Path) -> Matrix:
    document = parse_yaml(text, path.name)
    spec, loader = load_document(MatrixSpec, document)
    project: Project | None = None
    if spec is not None:
        project_dir = (path.parent / spec.project).resolve()
        found = read_project(project_dir)
        if isinstance(found, str):
            loader.problem("project", found)
        else:
            project = Project(name=found[0], version=found[1], path=project_dir)
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


def _destinations(
    specs: Mapping[str, DestinationSpec], loader: DocumentLoader
) -> dict[str, Destination]:
    out: dict[str, Destination] = {}
    only = {
        "pypi": {"repository_url"},
        "github": {"repository", "tag", "api_url"},
    }
    for name, spec in specs.items():
        path = join_path("destinations", name)
        for kind, keys in only.items():
            if spec.kind == kind:
                continue
            for key in sorted(keys):
                if getattr(spec, key) is not None:
                    yaml_key = key.replace("_", "-")
                    loader.problem(
                        join_path(path, yaml_key),
                        f"{yaml_key!r} is only for {kind} destinations (remove it)",
                    )
        for key in ("repository_url", "index_url", "api_url"):
            url = getattr(spec, key)
            if url is not None and not re.match(r"^https?://[^/\s]+", url):
                loader.problem(
                    join_path(path, key.replace("_", "-")),
                    f"{shown(url)} is not an http(s) URL",
                )
        if spec.max_file_size_mib is not None and spec.max_file_size_mib <= 0:
            loader.problem(join_path(path, "max-file-size-mib"), "must be a positive number")
        if spec.kind == "pypi":
            limit = spec.max_file_size_mib or PYPI_DEFAULT_MAX_MIB
            out[name] = PypiDestination(
                name=name,
                repository_url=spec.repository_url or "https://upload.pypi.org/legacy/",
                index_url=_slash(spec.index_url or "https://pypi.org/simple/"),
                max_file_size=limit * 1024 * 1024,
            )
            continue
        if spec.repository is None:
            loader.problem(
                join_path(path, "repository"),
                "required key 'repository' is missing for a github destination (owner/name)",
            )
            continue
        if repository_problem(spec.repository):
            loader.problem(
                join_path(path, "repository"),
                f"{shown(spec.repository)} is not a GitHub repository "
                f"({repository_problem(spec.repository)})",
            )
        template = spec.tag or "v{version}"
        if "{version}" not in template or re.search(r"\{(?!version\})", template):
            loader.problem(
                join_path(path, "tag"),
                f"{shown(template)} must contain {{version}} and no other placeholder",
            )
        limit = spec.max_file_size_mib or GITHUB_ASSET_MAX_MIB
        out[name] = GithubDestination(
            name=name,
            repository=spec.repository,
            tag_template=template,
            api_url=(spec.api_url or "https://api.github.com").rstrip("/"),
            index_url=_slash(spec.index_url) if spec.index_url else None,
            max_file_size=limit * 1024 * 1024,
        )
    return out


def _repeated(items: Sequence[T]) -> list[T]:
    """The items that occur more than once, each once, in order of first repetition."""
    seen: set[T] = set()
    out: dict[T, None] = {}
    for item in items:
        if item in seen:
            out[item] = None
        seen.add(item)
    return list(out)


def repository_problem(repository: str) -> str | None:
    """Why `repository` is not a GitHub `owner/name`, with the rule it breaks; or None."""
    owner, slash, name = repository.partition("/")
    if not slash or "/" in name:
        return "write owner/name"
    if not _OWNER_RE.match(owner):
        return "the owner is 1-39 letters, digits or single inner hyphens"
    if not _REPO_NAME_RE.match(name) or name in (".", ".."):
        return "the name is 1-100 letters, digits, '.', '_' or '-', and not '.' or '..'"
    return None


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _setting(
    name: str, entry: CudaSpec, defaults: WheelSettings, cuda_path: str
) -> tuple[Any, str]:
    """A setting's value for a CUDA entry and the key path it came from."""
    value = getattr(entry, name)
    if value is not None:
        return value, join_path(cuda_path, name)
    return getattr(defaults, name), join_path("defaults", name)


@dataclass(frozen=True, kw_only=True)
class _Settings:
    """One CUDA version's wheel settings (its own, else the defaults'), each with the key path
    it came from."""

    key: str
    path: str
    arches: list[Arch]
    arches_path: str
    sms: list[GpuTarget]
    sms_path: str
    ptx: PtxSpec | None
    ptx_path: str
    manylinux: ManylinuxSpec
    manylinux_path: str
    nccl: VersionSpec | None


def _settings(
    key: str, entry: CudaSpec, defaults: WheelSettings, loader: DocumentLoader
) -> _Settings | None:
    """A CUDA version's settings, or None (reported) where a required one is set nowhere."""
    cuda_path = join_path("cuda", key)
    arches, arches_path = _setting("arches", entry, defaults, cuda_path)
    sms, sms_path = _setting("sms", entry, defaults, cuda_path)
    ptx_spec, ptx_path = _setting("ptx", entry, defaults, cuda_path)
    manylinux, manylinux_path = _setting("manylinux", entry, defaults, cuda_path)
    nccl, _ = _setting("nccl", entry, defaults, cuda_path)
    for name, value in (("arches", arches), ("sms", sms), ("manylinux", manylinux)):
        if value is None:
            loader.problem(
                join_path(cuda_path, name),
                f"no {name!r} for CUDA {key} (set it here or under defaults)",
            )
    if arches is None or sms is None or manylinux is None:
        return None
    return _Settings(
        key=key,
        path=cuda_path,
        arches=arches,
        arches_path=arches_path,
        sms=sms,
        sms_path=sms_path,
        ptx=ptx_spec,
        ptx_path=ptx_path,
        manylinux=manylinux,
        manylinux_path=manylinux_path,
        nccl=nccl,
    )


def _cuda_versions(specs: Mapping[str, CudaSpec], loader: DocumentLoader) -> dict[str, CudaVersion]:
    """The CUDA versions of the matrix by their key; a key that is not one, or that repeats
    another's version, is reported and left out."""
    versions: dict[str, CudaVersion] = {}
    for key in specs:
        try:
            version = CudaVersion.parse(key)
        except ValueError as error:
            loader.problem(join_path("cuda", key), f'{error} (e.g. "12.9")')
            continue
        twin = next((k for k, v in versions.items() if v == version), None)
        if twin is not None:
            loader.problem(join_path("cuda", key), f"CUDA {version} is already listed as {twin!r}")
            continue
        versions[key] = version
    return versions


def _check_excludes(
    excludes: Sequence[ExcludeSpec], cuda: Mapping[str, CudaSpec], loader: DocumentLoader
) -> None:
    """Each exclusion on its own: a CUDA version of the matrix, and not empty."""
    for index, exclude in enumerate(excludes):
        if exclude.cuda is not None and exclude.cuda not in cuda:
            hint = did_you_mean(exclude.cuda, list(cuda))
            loader.problem(
                join_path(join_path("exclude", index), "cuda"),
                f"CUDA {exclude.cuda} is not in the matrix{hint}",
            )
        if exclude.cuda is None and exclude.arch is None and exclude.sm is None:
            loader.problem(join_path("exclude", index), "an empty exclusion would drop everything")


def _check_unused_excludes(
    excludes: Sequence[ExcludeSpec],
    used: set[int],
    cuda: Mapping[str, CudaSpec],
    loader: DocumentLoader,
) -> None:
    for index, exclude in enumerate(excludes):
        if index not in used and (exclude.cuda is None or exclude.cuda in cuda):
            loader.problem(join_path("exclude", index), "this exclusion matches no cell")


def _check_wheel_settings(settings: _Settings, loader: DocumentLoader) -> None:
    """The manylinux floor and the CPU architectures of a CUDA version."""
    manylinux = settings.manylinux
    if (manylinux.major, manylinux.minor) < _MIN_MANYLINUX:
        loader.problem(
            settings.manylinux_path,
            f"manylinux_{manylinux} is older than manylinux_2_17 (raise it)",
        )
    if not settings.arches:
        loader.problem(settings.arches_path, "no CPU architecture: list x86_64 and/or aarch64")
    for arch in _repeated(settings.arches):
        loader.problem(settings.arches_path, f"{arch} is listed more than once")


def _check_destination(
    key: str,
    entry: CudaSpec,
    defined: Mapping[str, DestinationSpec],
    destination: Destination | None,
    loader: DocumentLoader,
) -> None:
    """A CUDA version's destination: named, defined, and one that takes its label."""
    cuda_path = join_path("cuda", key)
    destination_path = join_path(cuda_path, "destination")
    if not entry.destination:
        loader.problem(destination_path, f"required key 'destination' is missing for {key}")
    elif entry.destination not in defined:
        hint = did_you_mean(entry.destination, list(defined))
        known = ", ".join(defined) or "none"
        loader.problem(
            destination_path,
            f"unknown destination {shown(entry.destination)}{hint} (defined: {known})",
        )
    elif isinstance(destination, PypiDestination) and entry.local_label:
        loader.problem(
            join_path(cuda_path, "local-label"),
            f"PyPI rejects local versions (+{entry.local_label}): publish this variant to "
            "a github destination, or drop the label to make it the default variant",
        )


def _cell_sms(
    key: str,
    arch: str,
    sms: Sequence[GpuTarget],
    excludes: Sequence[ExcludeSpec],
    used: set[int],
) -> list[GpuTarget] | None:
    """The SMs of the cell (CUDA `key`, `arch`) after the exclusions, or None when one drops
    the whole cell; the exclusions that apply are added to `used`."""
    cell_sms = list(dict.fromkeys(sms))
    dropped = False
    for index, exclude in enumerate(excludes):
        if exclude.cuda not in (None, key) or exclude.arch not in (None, arch):
            continue
        if exclude.sm is None:
            dropped = True
            used.add(index)
        elif exclude.sm in cell_sms:
            cell_sms.remove(exclude.sm)
            used.add(index)
    return None if dropped else cell_sms


def _arch_cells(
    *,
    project: Project,
    cuda: CudaVersion,
    entry: CudaSpec,
    settings: _Settings,
    recipe: BuildRecipe,
    destination: Destination,
    excludes: Sequence[ExcludeSpec],
    used: set[int],
    loader: DocumentLoader,
) -> list[Cell]:
    """A CUDA version's cells, one per CPU architecture that the exclusions leave and its
    backend can build."""
    cells: list[Cell] = []
    unbuildable_reported = False
    for arch in dict.fromkeys(settings.arches):
        cell_sms = _cell_sms(settings.key, arch, settings.sms, excludes, used)
        if cell_sms is None:
            continue
        ptx_spec = settings.ptx
        ptx = ptx_spec.target if ptx_spec is not None else max(cell_sms, default=None)
        if ptx is not None and ptx.suffix:
            ptx = GpuTarget(ptx.number)
        if not cell_sms and ptx is None:
            loader.problem(
                settings.sms_path,
                f"the exclusions leave CUDA {settings.key} {arch} with no SM and no PTX",
            )
            continue
        unbuildable = targets_problem(recipe.backend, sorted(cell_sms), ptx)
        if unbuildable is not None:
            # one report per CUDA version, at the key its targets come from
            if not unbuildable_reported:
                loader.problem(settings.ptx_path, unbuildable)
                unbuildable_reported = True
            continue
        cells.append(
            Cell(
                project=project,
                cuda=cuda,
                arch=arch,
                sms=tuple(sorted(cell_sms)),
                ptx=ptx,
                local_label=entry.local_label,
                destination=destination,
                nccl=settings.nccl.version if settings.nccl is not None else None,
                manylinux=str(settings.manylinux),
                build=recipe,
            )
        )
    return cells


def _version_cells(
    *,
    spec: MatrixSpec,
    project: Project,
    key: str,
    cuda: CudaVersion,
    destinations: Mapping[str, Destination],
    used: set[int],
    loader: DocumentLoader,
) -> list[Cell]:
    """The cells of one CUDA version, after the rules on its settings, targets, build, local
    label and destination; none where any of those is wrong."""
    entry = spec.cuda[key]
    settings = _settings(key, entry, spec.defaults or WheelSettings(), loader)
    if settings is None:
        return []
    ok = check_targets(
        cuda=cuda,
        key=key,
        sms=settings.sms,
        sms_path=settings.sms_path,
        ptx_spec=settings.ptx,
        ptx_path=settings.ptx_path,
        loader=loader,
    )
    _check_wheel_settings(settings, loader)
    recipe = cuda_build(spec.build, entry.build, settings.path, loader)
    label_ok = check_label(entry.local_label, join_path(settings.path, "local-label"), loader)
    destination = destinations.get(entry.destination)
    _check_destination(key, entry, spec.destinations, destination, loader)
    if not ok or not label_ok or destination is None:
        return []
    return _arch_cells(
        project=project,
        cuda=cuda,
        entry=entry,
        settings=settings,
        recipe=recipe,
        destination=destination,
        excludes=spec.exclude or [],
        used=used,
        loader=loader,
    )


def _validate(
    spec: MatrixSpec, project: Project, path: Path, loader: DocumentLoader
) -> Matrix | None:
    destinations = _destinations(spec.destinations, loader)
    release_build(spec, loader)
    excludes = spec.exclude or []
    if not spec.cuda:
        loader.problem("cuda", "the matrix is empty: add at least one CUDA version")
    versions = _cuda_versions(spec.cuda, loader)
    _check_excludes(excludes, spec.cuda, loader)
    used_excludes: set[int] = set()
    cells: list[Cell] = []
    for key, cuda in versions.items():
        cells += _version_cells(
            spec=spec,
            project=project,
            key=key,
            cuda=cuda,
            destinations=destinations,
            used=used_excludes,
            loader=loader,
        )
    _check_unused_excludes(excludes, used_excludes, spec.cuda, loader)
    check_cells(cells, {v: k for k, v in versions.items()}, path.name, loader)
    if not cells and spec.cuda and not loader.problems:
        loader.problem("cuda", "the matrix is empty: every cell is excluded")
    gate = gpu_gate(spec, loader, cells)
    return Matrix(
        path=path,
        project=project,
        cells=tuple(cells),
        destinations=destinations,
        gpu_gate=gate,
    )


def problems_of(text: str, filename: str = "matrix.yaml") -> list[Problem]:
    """Load only the document shape (no rules, no project): used by the schema tests."""
    _, loader = load_document(MatrixSpec, parse_yaml(text, filename))
    return loader.problems


__all__ = [
    "Cell",
    "Destination",
    "GithubDestination",
    "Matrix",
    "Project",
    "PypiDestination",
    "cell_dict",
    "load_matrix",
    "matrix_from_text",
    "matrix_json_schema",
    "nccl_package",
    "nccl_requirement",
    "problems_of",
]
