"""The build systems a cell can be built with, and what each receives: one module per
backend (contract: csrc's RELEASE_* contract; cmake_project; torch_extension) behind the
`Backend` protocol (base), the registry that names them, the rules of the `build:`
section, and what the nvcc-driven ones share (nvcc). This package exports what the rest
of release/ uses; a backend's own functions are imported from its module. Add a backend: a
module with a class that satisfies `Backend`, its name in recipe.BackendName, and one line
in registry.

Its modules:

- `archflags`: The GPU targets a compile line asks nvcc for, held to the cell's. torch's
  cpp_extension drops TORCH_CUDA_ARCH_LIST as soon as a project's own nvcc flags carry
  `-gencode` or `-arch`, and a CMake project can set its own flags beside (or instead of)
  CMAKE_CUDA_ARCHITECTURES: then the cell's SMs never reach nvcc.
- `base`: What every backend is: the `Backend` protocol, what it is told of a cell
  (`CellTargets`) and of the place it builds in (`BuildContext`), and what it gives the PEP 517
  build (`BuildInputs`).
- `compiled`: What this build's CUDA compiles wrote (the fatbins the compile wrapper
  records), and whether a wheel's device code is theirs.
- `cmake_project`: CMake-driven PEP 517 projects (scikit-build-core and others).
- `contract`: csrc's own backend: the RELEASE_* contract of csrc/BUILDING.md.
- `nvcc`: What the backends that drive nvcc (cmake, torch) share.
- `recipe`: The `build:` section of matrix.yaml and the recipe a CUDA version builds with,
  and the CUDA libraries it may name.
- `registry`: The backends by name, and the inputs of one cell's build by whichever backend it
  names.
- `rules`: The rules a `build:` section follows, whatever its backend.
- `torch_extension`: setuptools projects with torch's CUDAExtension (vLLM, flash-attention).
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
    pyproject_table,
    read_build_backend,
    with_path,
)
from release.backends.nvcc import NVCC_HINT, PLACEMENT_HINT
from release.backends.recipe import (
    CUDA_LIBRARY_NAMES,
    DEFAULT_BACKEND,
    DRIVER_LIBRARY,
    DRIVER_STUB,
    BuildRecipe,
    BuildSpec,
    CudaLibraryName,
    merge,
)
from release.backends.registry import backend_for, build_inputs
from release.backends.rules import (
    nvcc_problem,
    placement_problem,
    prepare_problems,
    spec_problems,
    targets_problem,
)

__all__ = [
    "CUDA_LIBRARY_NAMES",
    "DEFAULT_BACKEND",
    "DRIVER_LIBRARY",
    "DRIVER_STUB",
    "NVCC_HINT",
    "PLACEMENT_HINT",
    "BuildContext",
    "BuildInputs",
    "BuildRecipe",
    "BuildSpec",
    "BuildTools",
    "CellTargets",
    "CudaLibraryName",
    "EnvironmentPaths",
    "EnvironmentSpec",
    "NvccToolkit",
    "backend_for",
    "build_inputs",
    "merge",
    "nvcc_problem",
    "placement_problem",
    "prepare_problems",
    "pyproject_table",
    "read_build_backend",
    "spec_problems",
    "targets_problem",
    "with_path",
]
