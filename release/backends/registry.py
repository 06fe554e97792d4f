"""The backends by name, and the inputs of one cell's build by whichever backend it names:
the backend's own, then nvcc's place on PATH and its libraries, then the matrix's `env`,
`targets-env` and `config-settings` (which release.backends.rules keeps off the backend's
keys).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from release.backends.base import Backend, BuildContext, BuildInputs, CellTargets
from release.backends.cmake_project import CmakeBackend
from release.backends.contract import ContractBackend
from release.backends.recipe import DRIVER_LIBRARY, DRIVER_STUB, BackendName, TargetsFormat
from release.backends.torch_extension import TorchBackend, torch_arch_list
from release.targets import GpuTarget

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
        library_path = [context.toolkit.library_dir] if context.toolkit.library_dir else []
        if DRIVER_LIBRARY in cell.recipe.cuda_libraries:
            # -lcuda finds the driver's link stub where CUDA's devel images point the linker
            library_path.append(context.toolkit.root / DRIVER_STUB.parent)
        if library_path:
            env["LIBRARY_PATH"] = os.pathsep.join(map(str, library_path))
    for name, value in cell.recipe.env:
        joined = name in FLAG_VARIABLES and env.get(name)
        env[name] = f"{env[name]} {value}" if joined else value
    env.update(targets_variables(cell.recipe.targets_env, cell.sms, cell.ptx))
    settings = {**inputs.config_settings, **dict(cell.recipe.config_settings)}
    return BuildInputs(env=env, config_settings=settings, path=path, files=inputs.files)


def targets_variables(
    variables: Sequence[tuple[str, TargetsFormat]],
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
) -> dict[str, str]:
    """The matrix's `targets-env`: each variable with the cell's targets in its format; none
    for a cell without device code (as it gets no TORCH_CUDA_ARCH_LIST)."""
    if not sms:
        return {}

    def spelled(form: TargetsFormat) -> str:
        if form == "sms":
            return ";".join(str(t) for t in sms)
        return torch_arch_list(sms, ptx)  # the loader held the cell to torch's rule

    return {name: spelled(form) for name, form in variables}
