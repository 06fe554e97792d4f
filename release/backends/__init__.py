"""The build systems a cell can be built with, and what each receives: one module per
backend (contract: csrc's RELEASE_* contract; cmake_project; torch_extension) behind the
`Backend` protocol (base), the registry that names them, the rules of the `build:`
section, and what the nvcc-driven ones share (nvcc). This package exports what the rest
of release/ uses; a backend's own functions are imported from its module. Add a backend: a
module with a class that satisfies `Backend`, its name in recipe.BackendName, and one line
in registry.
"""

from __future__ import annotations

from release.backends.base import (
    BuildContext,
    BuildInputs,
    BuildTools,
    CellTargets,
    EnvironmentPaths,
    EnvironmentSpec,
    NvccToolkit,
    read_build_backend,
    with_path,
)
from release.backends.nvcc import NVCC_HINT, PLACEMENT_HINT
from release.backends.recipe import (
    DEFAULT_BACKEND,
    BuildRecipe,
    BuildSpec,
    merge,
)
from release.backends.registry import backend_for, build_inputs
from release.backends.rules import (
    nvcc_problem,
    placement_problem,
    spec_problems,
    targets_problem,
)

__all__ = [
    "DEFAULT_BACKEND",
    "NVCC_HINT",
    "PLACEMENT_HINT",
    "BuildContext",
    "BuildInputs",
    "BuildRecipe",
    "BuildSpec",
    "BuildTools",
    "CellTargets",
    "EnvironmentPaths",
    "EnvironmentSpec",
    "NvccToolkit",
    "backend_for",
    "build_inputs",
    "merge",
    "nvcc_problem",
    "placement_problem",
    "read_build_backend",
    "spec_problems",
    "targets_problem",
    "with_path",
]
