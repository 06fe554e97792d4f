"""matrix.yaml, the input: its specification, loading with file:line errors, the rules, and the
cells it expands to. Import from here.

Its modules:

- `cells`: A CUDA version of matrix.yaml and the cells it expands to.
- `copies`: Where a CUDA version's wheels go: its `destination`, one name (with the version's
  `local-label`) or a list of copies, each a name or `{name, local-label}`.
- `compilecache`: Where the compiles of a build keep their objects: matrix.yaml's `compile-
  cache:`, or `--compile-cache` / RELEASE_COMPILE_CACHE, which replace it.
- `destination`: The destinations of matrix.yaml: each kind's value, with the facts the rules
  and the manifest ask of it, how its entry loads, and the table the loader dispatches through
  (`KINDS`).
- `gitindex`: The git-index destinations of matrix.yaml, and the keys of a github destination
  that reach past its own repository: `token-secret` (the token that writes there) and `index`
  (the git-index destination that lists its wheels).
- `load`: matrix.yaml: validation and expansion into cells.
- `model`: The validated release matrix: the cells `release` builds, each with everything it is
  built with and where its wheel goes.
- `nightly`: The nightly channel of matrix.yaml: its s3 destination, its retention keys, and
  what a commit's nightly builds.
- `rules`: The rules of matrix.yaml that look at more than one value.
- `torchaxes`: torch's own axes of a CUDA version: its torch versions times its Pythons (or
  one abi3 floor), the rules on them, and the `{torch}` of its local label.
- `spec`: The document matrix.yaml is: these frozen dataclasses are its specification.
  release.yamlspec reads their type hints to load a document (with file:line:col errors) and to
  generate the JSON Schema, so the loader and the schema cannot disagree.
"""

from __future__ import annotations

from release.matrix.cells import T
from release.matrix.destination import (
    GITHUB_ASSET_MAX_MIB,
    INDEX_KINDS,
    KINDS,
    PYPI_DEFAULT_MAX_MIB,
    PYPI_DEFAULT_PROJECT_GIB,
    BaseDestination,
    Destination,
    GithubDestination,
    GitIndexDestination,
    IndexDestination,
    PypiDestination,
    S3Destination,
    destination_name_problem,
    kinds_text,
)
from release.matrix.load import (
    SCHEMA_ID,
    load_matrix,
    matrix_from_text,
    matrix_json_schema,
    parse_yaml,
    read_project,
)
from release.matrix.model import (
    GATE_PLACEHOLDERS,
    Cell,
    Commit,
    Copy,
    GateRun,
    GpuGate,
    GpuRunner,
    Matrix,
    Nightly,
    Project,
    cell_dict,
    copy_dict,
    nccl_package,
    nccl_requirement,
)
from release.matrix.nightly import nightly_matrix, nightly_version, require_nightly
from release.matrix.spec import Fallout

__all__ = [
    "GATE_PLACEHOLDERS",
    "GITHUB_ASSET_MAX_MIB",
    "INDEX_KINDS",
    "KINDS",
    "PYPI_DEFAULT_MAX_MIB",
    "PYPI_DEFAULT_PROJECT_GIB",
    "SCHEMA_ID",
    "BaseDestination",
    "Cell",
    "Commit",
    "Copy",
    "Destination",
    "Fallout",
    "GateRun",
    "GitIndexDestination",
    "GithubDestination",
    "GpuGate",
    "GpuRunner",
    "IndexDestination",
    "Matrix",
    "Nightly",
    "Project",
    "PypiDestination",
    "S3Destination",
    "T",
    "cell_dict",
    "copy_dict",
    "destination_name_problem",
    "kinds_text",
    "load_matrix",
    "matrix_from_text",
    "matrix_json_schema",
    "nccl_package",
    "nccl_requirement",
    "nightly_matrix",
    "nightly_version",
    "parse_yaml",
    "read_project",
    "require_nightly",
]
