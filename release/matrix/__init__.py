"""matrix.yaml, the input: its specification, loading with file:line errors, the rules, and the
cells it expands to. Import from here.
"""

from __future__ import annotations

from release.matrix.cells import T
from release.matrix.load import (
    GITHUB_ASSET_MAX_MIB,
    PYPI_DEFAULT_MAX_MIB,
    SCHEMA_ID,
    load_matrix,
    matrix_from_text,
    matrix_json_schema,
    parse_yaml,
    read_project,
    repository_problem,
)
from release.matrix.model import (
    GATE_PLACEHOLDERS,
    PYPI_DEFAULT_PROJECT_GIB,
    Cell,
    Commit,
    Destination,
    GateRun,
    GithubDestination,
    GpuGate,
    GpuRunner,
    Matrix,
    Nightly,
    Project,
    PypiDestination,
    S3Destination,
    cell_dict,
    nccl_package,
    nccl_requirement,
)
from release.matrix.nightly import nightly_matrix, nightly_version, require_nightly
from release.matrix.spec import Fallout

__all__ = [
    "GATE_PLACEHOLDERS",
    "GITHUB_ASSET_MAX_MIB",
    "PYPI_DEFAULT_MAX_MIB",
    "PYPI_DEFAULT_PROJECT_GIB",
    "SCHEMA_ID",
    "Cell",
    "Commit",
    "Destination",
    "Fallout",
    "GateRun",
    "GithubDestination",
    "GpuGate",
    "GpuRunner",
    "Matrix",
    "Nightly",
    "Project",
    "PypiDestination",
    "S3Destination",
    "T",
    "cell_dict",
    "load_matrix",
    "matrix_from_text",
    "matrix_json_schema",
    "nccl_package",
    "nccl_requirement",
    "nightly_matrix",
    "nightly_version",
    "parse_yaml",
    "read_project",
    "repository_problem",
    "require_nightly",
]
