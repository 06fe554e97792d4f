"""CMake-driven PEP 517 projects (scikit-build-core and others: sgl-kernel):
CMAKE_CUDA_ARCHITECTURES (also as CUDAARCHS and in CMAKE_ARGS), CMAKE_CUDA_COMPILER /
CUDACXX / CUDA_HOME / CUDAToolkit_ROOT, CMAKE_BUILD_PARALLEL_LEVEL; cmake and ninja from
PyPI first on PATH; the local label by rewriting the built wheel.

Built here, every CUDA step goes through the compile wrapper (release.toolchain.nvccwrap),
whoever runs nvcc: CMAKE_CUDA_COMPILER is a script of the cell's that runs nvcc through
it (so a custom command that runs ${CMAKE_CUDA_COMPILER}, and a device link, go through
it too), and a CMake file included at the project's first project() puts the wrapper in
front of every target's CUDA compiler launcher, the project's own included (a compile
cache such as sccache, in front of the wrapper, would write objects the wrapper never
sees: sccache runs nvcc's parts itself, and a cache hit runs nothing).
"""

from __future__ import annotations

import shlex
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
from release.backends.recipe import DRIVER_LIBRARY, DRIVER_STUB, BackendName
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


# in the cell's build directory: the compiler script and the file that wraps the launchers
COMPILER_SCRIPT = "nvcc-wrapper/nvcc"
LAUNCHERS_FILE = "release-cuda-launchers.cmake"
# FindCUDAToolkit's cache variable of CUDA::cuda_driver (the driver's libcuda)
DRIVER_VARIABLE = "CUDA_cuda_driver_LIBRARY"

NVCC_SCRIPT = """\
#!/bin/sh
# nvcc of a CMake cell's build (written by cuda-wheel-release): release.toolchain.nvccwrap
# under the Python the build names in RELEASE_NVCC_PYTHON, else nvcc itself
real=%(real)s
if [ -z "${RELEASE_NVCC_PYTHON:-}" ]; then
  exec "$real" "$@"
fi
exec "$RELEASE_NVCC_PYTHON" -I -m release.toolchain.nvccwrap launch "$real" "$@"
"""

# Included at the first project() (CMAKE_PROJECT_TOP_LEVEL_INCLUDES); its deferred call
# runs once the top-level CMakeLists.txt is read, every target made.
LAUNCHERS_CMAKE = """\
# Written by cuda-wheel-release: every CUDA compile of the project's targets goes through
# its compile wrapper first, in front of any compiler launcher the project sets itself.
if(CMAKE_VERSION VERSION_LESS 3.19)
  return()
endif()
set(_release_cuda_wrapper %(wrapper)s)
function(_release_wrap_cuda_launchers directory)
  get_property(targets DIRECTORY "${directory}" PROPERTY BUILDSYSTEM_TARGETS)
  list(LENGTH _release_cuda_wrapper count)
  foreach(target IN LISTS targets)
    get_target_property(type "${target}" TYPE)
    if(type MATCHES "^(STATIC|SHARED|MODULE|OBJECT)_LIBRARY$|^EXECUTABLE$")
      get_target_property(launcher "${target}" CUDA_COMPILER_LAUNCHER)
      if(NOT launcher)
        set(launcher "")
      endif()
      list(SUBLIST launcher 0 ${count} head)
      if(NOT "${head}" STREQUAL "${_release_cuda_wrapper}")
        set_property(TARGET "${target}" PROPERTY
          CUDA_COMPILER_LAUNCHER ${_release_cuda_wrapper} ${launcher})
      endif()
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY "${directory}" PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    _release_wrap_cuda_launchers("${subdirectory}")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}"
  CALL _release_wrap_cuda_launchers "${CMAKE_SOURCE_DIR}")
"""


def cmake_bracket(text: str) -> str:
    """`text` as a CMake bracket argument (taken as it is: no `;`, `$` or `\\` read)."""
    level = 1
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def wrapper_command(checker: Path) -> list[str]:
    """The compile wrapper's command line, before the line it launches."""
    return [str(checker), "-I", "-m", WRAPPER_MODULE, "launch"]


def wrapped_compiler_files(
    nvcc: Path, checker: Path, build_dir: Path
) -> tuple[Path, Path, dict[Path, str]]:
    """(the compiler script, the launchers file, both with their texts) in `build_dir`."""
    script, launchers = build_dir / COMPILER_SCRIPT, build_dir / LAUNCHERS_FILE
    wrapper = " ".join(cmake_bracket(word) for word in wrapper_command(checker))
    return (
        script,
        launchers,
        {
            script: NVCC_SCRIPT % {"real": shlex.quote(str(nvcc))},
            launchers: LAUNCHERS_CMAKE % {"wrapper": wrapper},
        },
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
    compiler: Path | None = None,
    includes: Path | None = None,
    driver: bool = False,
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
    The CUDA compiler is `compiler` where one is named (the cell's compiler script), and
    `includes` is the file CMake includes at the first project(). Where the cell links the
    `driver`'s libcuda, CUDA::cuda_driver is named the CUDA_HOME's link stub: FindCUDAToolkit
    would take a libcuda.so of the building machine's driver before any stub.
    """
    architectures = cmake_architectures(sms, ptx)
    nvcc = compiler or toolkit.nvcc
    # a cell without device code (device-code: none) names no architectures: an empty
    # CMAKE_CUDA_ARCHITECTURES is an error in a project that enables CUDA
    cmake_args = [f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"] if architectures else []
    cmake_args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    if includes is not None:
        cmake_args.append(f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={includes}")
    stub = toolkit.root / DRIVER_STUB
    if driver:
        cmake_args.append(f"-D{DRIVER_VARIABLE}={stub}")
    env = {
        **({"CUDAARCHS": architectures} if architectures else {}),
        "CMAKE_ARGS": " ".join(cmake_args),
        "CUDACXX": str(nvcc),
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
            "cmake.define.CMAKE_CUDA_COMPILER": str(nvcc),
        }
        if includes is not None:
            settings["cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES"] = str(includes)
        if driver:
            settings[f"cmake.define.{DRIVER_VARIABLE}"] = str(stub)
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
        env["CMAKE_CUDA_COMPILER_LAUNCHER"] = ";".join(
            [*wrapper_command(checker), *([str(launcher)] if launcher is not None else [])]
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
            "cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES",
        }
    )
    torch_axes = False
    ptx_beside_cubin = False
    labels_by_rewriting = True
    tag_remedy = NVCC_TAG_REMEDY
    arch_hints: ArchHints | None = ARCH_HINTS

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
        checks = check_inputs(cell.sms, cell.ptx, cell.cuda, context)
        # no nvcc to run (a CUDA_HOME of headers and libraries): CMake is named its bin/nvcc
        # itself, which FindCUDAToolkit runs and takes the toolkit's root from, and which
        # says why it cannot compile to a project that enables CUDA
        checker = context.tool_python if checks and toolkit.has_nvcc else None
        compiler = includes = None
        files: dict[Path, str] = {}
        if checker is not None and context.build_dir is not None:
            compiler, includes, files = wrapped_compiler_files(
                toolkit.nvcc, checker, context.build_dir
            )
            checks |= {"RELEASE_NVCC_SCRIPT": str(compiler), "RELEASE_NVCC_REAL": str(toolkit.nvcc)}
        env, settings = cmake_inputs(
            cell.sms,
            cell.ptx,
            toolkit,
            jobs=context.jobs,
            build_backend=cell.build_backend,
            compress_mode=cell.compress_mode,
            compiler=compiler,
            includes=includes,
            driver=DRIVER_LIBRARY in cell.recipe.cuda_libraries,
        )
        env.update(checks)
        if checks and context.project_dir is not None:
            env["RELEASE_NVCC_SOURCE_ROOT"] = str(context.project_dir)
        env.update(launcher_inputs(context.compile_launcher, checker))
        # the build's own files (setuptools' build/ and egg-info, CMake's) stay out of the
        # checkout, in the cell's build directory
        tree_env, tree_settings, tree_files = out_of_tree_inputs(
            cell.build_backend, context.build_dir
        )
        env.update(tree_env)
        settings.update(tree_settings)
        files = {**files, **tree_files}
        return BuildInputs(env=env, config_settings=settings, path=context.tools.path, files=files)

    def describe(self, cell: CellTargets, build_tools: str) -> tuple[str, str]:
        return (
            f"PyPI {build_tools}; host g++ from PATH",
            "CMAKE_CUDA_ARCHITECTURES / CUDAARCHS "
            f"{cmake_architectures(cell.sms, cell.ptx) or '(none: no device code)'}, CUDACXX, "
            "CUDA_HOME, CUDAToolkit_ROOT, "
            "CMAKE_BUILD_PARALLEL_LEVEL"
            + "".join(f", CUDAFLAGS {flag}" for flag in compress_flags(cell.compress_mode))
            + (
                f", {DRIVER_VARIABLE} (the driver's link stub)"
                if DRIVER_LIBRARY in cell.recipe.cuda_libraries
                else ""
            )
            + "; label by rewriting the wheel",
        )
