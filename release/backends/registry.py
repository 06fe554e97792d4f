"""The backends by name, and the inputs of one cell's build by whichever backend it names:
the backend's own, then nvcc's place on PATH and its libraries, then the matrix's `env`
and `config-settings` (which release.backends.rules keeps off the backend's keys).
"""

from __future__ import annotations

from collections.abc import Mapping

from release.backends.base import Backend, BuildContext, BuildInputs, CellTargets
from release.backends.cmake_project import CmakeBackend
from release.backends.contract import ContractBackend
from release.backends.recipe import BackendName
from release.backends.torch_extension import TorchBackend

BACKENDS: Mapping[BackendName, Backend] = {
    backend.name: backend for backend in (ContractBackend(), CmakeBackend(), TorchBackend())
}


def backend_for(name: BackendName) -> Backend:
    return BACKENDS[name]


# Compiler flags a backend and the matrix may both give: the matrix's come after (and so
# win where a compiler takes the last of two).
FLAG_VARIABLES = frozenset(
    {
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "CUDAFLAGS",
        "NVCC_APPEND_FLAGS",
        "NVCC_PREPEND_FLAGS",
    }
)


def build_inputs(cell: CellTargets, context: BuildContext) -> BuildInputs:
    """Everything the cell's PEP 517 build gets besides this process's environment."""
    backend = backend_for(cell.recipe.backend)
    inputs = backend.inputs(cell, context)
    env = dict(inputs.env)
    path = inputs.path
    if backend.needs_nvcc and context.toolkit is not None:
        path = (*path, context.toolkit.root / "bin")
        if context.toolkit.library_dir is not None:
            env["LIBRARY_PATH"] = str(context.toolkit.library_dir)
    for name, value in cell.recipe.env:
        joined = name in FLAG_VARIABLES and env.get(name)
        env[name] = f"{env[name]} {value}" if joined else value
    settings = {**inputs.config_settings, **dict(cell.recipe.config_settings)}
    return BuildInputs(env=env, config_settings=settings, path=path, files=inputs.files)
