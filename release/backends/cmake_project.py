"""CMake-driven PEP 517 projects (scikit-build-core and others: sgl-kernel, FlashInfer):
CMAKE_CUDA_ARCHITECTURES (also as CUDAARCHS and in CMAKE_ARGS), CMAKE_CUDA_COMPILER /
CUDACXX / CUDA_HOME / CUDAToolkit_ROOT, CMAKE_BUILD_PARALLEL_LEVEL; cmake and ninja from
PyPI first on PATH; the local label by rewriting the built wheel.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from release.backends.archflags import ArchHints
from release.backends.base import (
    SCIKIT_BUILD_CORE,
    BuildContext,
    BuildInputs,
    CellTargets,
    NvccToolkit,
    out_of_tree_inputs,
)
from release.backends.nvcc import (
    CHECK_VARIABLES,
    NVCC_TAG_REMEDY,
    WRAPPER_MODULE,
    check_inputs,
    compress_flags,
    family_problem,
    require_toolkit,
)
from release.backends.recipe import BackendName
from release.targets import GpuTarget

SCIKIT_BUILD_BACKEND = SCIKIT_BUILD_CORE

ARCH_HINTS = ArchHints(
    variable="CMAKE_CUDA_ARCHITECTURES",
    cause=(
        "the project's CMake gives nvcc its own -gencode/-arch flags (CMAKE_CUDA_FLAGS, "
        "target_compile_options) or its own CUDA_ARCHITECTURES, beside or instead of "
        "CMAKE_CUDA_ARCHITECTURES"
    ),
    honour=(
        "make the project's CMakeLists.txt honour CMAKE_CUDA_ARCHITECTURES (no -gencode or "
        "-arch flags and no CUDA_ARCHITECTURES property of its own where it is set)"
    ),
    arch_file="CMakeLists.txt",
    gencode_sits="beside",
)


def cmake_architectures(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str:
    """CMAKE_CUDA_ARCHITECTURES: a cubin per SM (`75-real`, `90a-real`, `100f-real`) and PTX
    for the PTX target (`100-virtual`)."""
    parts = [f"{target}-real" for target in sms]
    if ptx is not None:
        parts.append(f"{ptx}-virtual")
    return ";".join(parts)


def cmake_inputs(
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
    toolkit: NvccToolkit,
    *,
    jobs: int,
    build_backend: str | None,
    compress_mode: str | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, config settings) of a CMake-driven build.

    CMake reads no CMAKE_CUDA_ARCHITECTURES variable from the environment: the list goes
    to CUDAARCHS (read when the cache has none), to CMAKE_ARGS (read by scikit-build-core
    and most setuptools+CMake builds, split on spaces only) and, for scikit-build-core, to
    `cmake.define.CMAKE_CUDA_ARCHITECTURES`. Never to SKBUILD_CMAKE_ARGS, which
    scikit-build-core splits on `;`: that builds the first SM alone and exits 0.
    CMake ignores CUDA_HOME: CUDACXX / CMAKE_CUDA_COMPILER name nvcc. The compress mode
    goes to CUDAFLAGS, which CMake's first configure takes as CMAKE_CUDA_FLAGS (a
    -DCMAKE_CUDA_FLAGS would replace the flags the project's own CUDAFLAGS give).
    """
    architectures = cmake_architectures(sms, ptx)
    # a cell without device code (device-code: none) names no architectures: an empty
    # CMAKE_CUDA_ARCHITECTURES is an error in a project that enables CUDA
    defines = [f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"] if architectures else []
    env = {
        **({"CUDAARCHS": architectures} if architectures else {}),
        "CMAKE_ARGS": " ".join([*defines, f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}"]),
        "CUDACXX": str(toolkit.nvcc),
        "CUDA_HOME": str(toolkit.root),
        "CUDAToolkit_ROOT": str(toolkit.root),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
    }
    if compress_mode is not None:
        env["CUDAFLAGS"] = " ".join(compress_flags(compress_mode))
    settings = {}
    if build_backend == SCIKIT_BUILD_BACKEND:
        settings = {
            **({"cmake.define.CMAKE_CUDA_ARCHITECTURES": architectures} if architectures else {}),
            "cmake.define.CMAKE_CUDA_COMPILER": str(toolkit.nvcc),
        }
    return env, settings


def launcher_inputs(launcher: Path | None, checker: Path | None = None) -> dict[str, str]:
    """CMake's compiler launchers (read from the environment since CMake 3.17): every C,
    C++ and CUDA compile through `launcher`; with the tool's Python `checker`, every CUDA
    compile through the compile wrapper first, which holds it to the cell's targets (a
    launcher is a `;` list: the command line before the compiler's)."""
    env = {}
    if launcher is not None:
        env = {f"CMAKE_{lang}_COMPILER_LAUNCHER": str(launcher) for lang in ("C", "CXX", "CUDA")}
    if checker is not None:
        wrapper = [str(checker), "-I", "-m", WRAPPER_MODULE, "launch"]
        env["CMAKE_CUDA_COMPILER_LAUNCHER"] = ";".join(
            [*wrapper, *([str(launcher)] if launcher is not None else [])]
        )
    return env


class CmakeBackend:
    name: BackendName = "cmake"
    needs_nvcc = True
    owned_env = frozenset(
        {
            "CUDAARCHS",
            "CMAKE_CUDA_ARCHITECTURES",
            "CMAKE_CUDA_COMPILER",
            "CUDACXX",
            "CUDA_HOME",
            "CUDAToolkit_ROOT",
            "CMAKE_C_COMPILER_LAUNCHER",
            "CMAKE_CXX_COMPILER_LAUNCHER",
            "CMAKE_CUDA_COMPILER_LAUNCHER",
            "RELEASE_NVCC_SOURCE_ROOT",
            "DIST_EXTRA_CONFIG",
            *CHECK_VARIABLES,
        }
    )
    owned_settings = frozenset(
        {
            "cmake.define.CMAKE_CUDA_ARCHITECTURES",
            "cmake.define.CMAKE_CUDA_COMPILER",
            "cmake.define.CUDAToolkit_ROOT",
        }
    )
    torch_axes = False
    ptx_beside_cubin = False
    labels_by_rewriting = True
    tag_remedy = NVCC_TAG_REMEDY
    arch_hints: ArchHints | None = ARCH_HINTS
    provided_libraries: tuple[str, ...] = ()

    def environment(self, cell: CellTargets) -> None:
        return None  # an isolated PEP 517 environment of the tool's Python

    def uses_compile_cache(self, device_compiler: str) -> bool:
        return True  # nvcc from the cell's toolkit, whatever csrc's device compiler

    def setting_problem(self, name: str, value: str) -> str | None:
        if "CMAKE_CUDA_ARCHITECTURES" in value:
            return "the GPU targets come from the cell's sms and ptx: remove them here"
        return None

    def targets_problem(self, sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
        return family_problem(sms)

    def inputs(self, cell: CellTargets, context: BuildContext) -> BuildInputs:
        toolkit = require_toolkit(context, self.name, cell.cuda)
        env, settings = cmake_inputs(
            cell.sms,
            cell.ptx,
            toolkit,
            jobs=context.jobs,
            build_backend=cell.build_backend,
            compress_mode=cell.compress_mode,
        )
        checks = check_inputs(cell.sms, cell.ptx, cell.cuda, context)
        env.update(checks)
        if checks and context.project_dir is not None:
            env["RELEASE_NVCC_SOURCE_ROOT"] = str(context.project_dir)
        checker = context.tool_python if checks else None
        env.update(launcher_inputs(context.compile_launcher, checker))
        # the build's own files (setuptools' build/ and egg-info, CMake's) stay out of the
        # checkout, in the cell's build directory
        tree_env, tree_settings, files = out_of_tree_inputs(cell.build_backend, context.build_dir)
        env.update(tree_env)
        settings.update(tree_settings)
        return BuildInputs(env=env, config_settings=settings, path=context.tools.path, files=files)

    def describe(self, cell: CellTargets, build_tools: str) -> tuple[str, str]:
        return (
            f"PyPI {build_tools}; host g++ from PATH",
            "CMAKE_CUDA_ARCHITECTURES / CUDAARCHS "
            f"{cmake_architectures(cell.sms, cell.ptx) or '(none: no device code)'}, CUDACXX, "
            "CUDA_HOME, CUDAToolkit_ROOT, "
            "CMAKE_BUILD_PARALLEL_LEVEL"
            + "".join(f", CUDAFLAGS {flag}" for flag in compress_flags(cell.compress_mode))
            + "; label by rewriting the wheel",
        )
