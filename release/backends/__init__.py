"""The build systems a cell can be built with, and what each receives: one module per
backend (contract: csrc's RELEASE_* contract; cmake_project; torch_extension) behind the
`Backend` protocol (base), the registry that names them, the rules of the `build:`
section, and what the nvcc-driven ones share (nvcc). Add a backend: a module with a class
that satisfies `Backend`, its name in recipe.BackendName, and one line in registry.
"""

from __future__ import annotations

from release.backends.base import (
    Backend,
    BuildContext,
    BuildInputs,
    BuildTools,
    CellTargets,
    NvccToolkit,
    read_build_backend,
    with_path,
)
from release.backends.cmake_project import cmake_architectures, cmake_inputs
from release.backends.nvcc import NVCC_HINT, PLACEMENT_HINT
from release.backends.recipe import (
    BACKEND_NAMES,
    DEFAULT_BACKEND,
    BackendName,
    BuildRecipe,
    BuildSpec,
    merge,
)
from release.backends.registry import BACKENDS, backend_for, build_inputs
from release.backends.rules import (
    nvcc_problem,
    placement_problem,
    spec_problems,
    targets_problem,
)
from release.backends.torch_extension import torch_arch, torch_arch_list, torch_inputs

__all__ = [
    "BACKENDS",
    "BACKEND_NAMES",
    "DEFAULT_BACKEND",
    "NVCC_HINT",
    "PLACEMENT_HINT",
    "Backend",
    "BackendName",
    "BuildContext",
    "BuildInputs",
    "BuildRecipe",
    "BuildSpec",
    "BuildTools",
    "CellTargets",
    "NvccToolkit",
    "backend_for",
    "build_inputs",
    "cmake_architectures",
    "cmake_inputs",
    "merge",
    "nvcc_problem",
    "placement_problem",
    "read_build_backend",
    "spec_problems",
    "targets_problem",
    "torch_arch",
    "torch_arch_list",
    "torch_inputs",
    "with_path",
]
