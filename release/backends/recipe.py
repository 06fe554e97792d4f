"""Bring your own build: the build systems a cell can be built with, and what each receives.

A kernel project names its build in matrix.yaml's `build:` section (per release, and per
CUDA version where one differs):

- `release`: the contract of csrc/ (RELEASE_SMS, RELEASE_PTX, ... in csrc/BUILDING.md);
- `cmake`: a scikit-build-core or other CMake-driven PEP 517 project (sgl-kernel,
  FlashInfer): CMAKE_CUDA_ARCHITECTURES (also as CUDAARCHS), CMAKE_CUDA_COMPILER /
  CUDACXX / CUDA_HOME / CUDAToolkit_ROOT, CMAKE_BUILD_PARALLEL_LEVEL;
- `torch`: setuptools with torch's CUDAExtension (vLLM, flash-attention):
  TORCH_CUDA_ARCH_LIST, CUDA_HOME, MAX_JOBS, NVCC_THREADS.

Pure: the `BuildSpec` of the document (yamlspec loads it and writes its schema), the
rules it must follow (`spec_problems`, `targets_problem`), the recipe of a CUDA version
(`merge`), each backend's spelling of the cell's GPU targets (`cmake_architectures`,
`torch_arch_list`), the inputs of one cell's build (`build_inputs`), and where a cell can
build (`placement_problem`, `nvcc_problem`). Nothing here runs a process.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from release.credentials import is_secret_name
from release.errors import shown
from release.targets import GpuTarget
from release.yamlspec import join_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

Backend = Literal["release", "cmake", "torch"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
DEFAULT_BACKEND: Backend = "release"
NVCC_BACKENDS: frozenset[Backend] = frozenset({"cmake", "torch"})

# What each backend is told by `release` from the cell; a matrix that sets one of these in
# `env` or `config-settings` would contradict the cell's sms/ptx/toolchain.
OWNED_ENV: Mapping[Backend, frozenset[str]] = {
    "release": frozenset(
        {
            "RELEASE_SMS",
            "RELEASE_PTX",
            "RELEASE_TARGET_ARCH",
            "RELEASE_LOCAL_LABEL",
            "RELEASE_CUDA_VERSION",
            "RELEASE_DEVICE_COMPILER",
            "RELEASE_CUDA_HOME",
            "RELEASE_CC",
        }
    ),
    "cmake": frozenset(
        {
            "CUDAARCHS",
            "CMAKE_CUDA_ARCHITECTURES",
            "CMAKE_CUDA_COMPILER",
            "CUDACXX",
            "CUDA_HOME",
            "CUDAToolkit_ROOT",
        }
    ),
    "torch": frozenset({"TORCH_CUDA_ARCH_LIST", "CUDA_HOME"}),
}
OWNED_SETTINGS: Mapping[Backend, frozenset[str]] = {
    "release": OWNED_ENV["release"],
    "cmake": frozenset(
        {
            "cmake.define.CMAKE_CUDA_ARCHITECTURES",
            "cmake.define.CMAKE_CUDA_COMPILER",
            "cmake.define.CUDAToolkit_ROOT",
        }
    ),
    "torch": frozenset(),
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCIKIT_BUILD_BACKEND = "scikit_build_core.build"


# --- The document. ---


@dataclass(frozen=True)
class BuildSpec:
    """How the kernel project is built, and what its build gets besides the cell."""

    backend: Backend | None = field(
        default=None,
        metadata={"doc": "release (csrc's RELEASE_* contract), cmake or torch; default release"},
    )
    env: dict[str, str] | None = field(
        default=None, metadata={"doc": "environment variables of the build"}
    )
    config_settings: dict[str, str] | None = field(
        default=None, metadata={"doc": "PEP 517 config settings (-C KEY=VALUE) of the build"}
    )


# --- The validated model. ---


@dataclass(frozen=True, kw_only=True)
class BuildRecipe:
    """The build of one CUDA version: the backend, and the matrix's own variables and
    config settings (sorted pairs, so that a cell stays hashable)."""

    backend: Backend = DEFAULT_BACKEND
    env: tuple[tuple[str, str], ...] = ()
    config_settings: tuple[tuple[str, str], ...] = ()

    @property
    def needs_nvcc(self) -> bool:
        return self.backend in NVCC_BACKENDS


def merge(release: BuildSpec | None, cuda: BuildSpec | None) -> BuildRecipe:
    """A CUDA version's recipe: its own `build` over the release's, key by key (`env` and
    `config-settings` merge, the CUDA version's value winning)."""
    backend: Backend = DEFAULT_BACKEND
    env: dict[str, str] = {}
    settings: dict[str, str] = {}
    for spec in (release, cuda):
        if spec is None:
            continue
        backend = spec.backend or backend
        env.update(spec.env or {})
        settings.update(spec.config_settings or {})
    return BuildRecipe(
        backend=backend,
        env=tuple(sorted(env.items())),
        config_settings=tuple(sorted(settings.items())),
    )


def spec_problems(spec: BuildSpec, backend: Backend, path: str) -> list[tuple[str, str]]:
    """(key path, message) for each rule the `build` section at `path` breaks when built by
    `backend` (the backend in force there, which may come from the release's section)."""
    problems: list[tuple[str, str]] = []
    for name in spec.env or {}:
        key = join_path(join_path(path, "env"), name)
        if not _ENV_NAME.match(name):
            problems.append((key, f"{shown(name)} is not an environment variable name"))
        elif name in OWNED_ENV[backend]:
            problems.append(
                (
                    key,
                    f"{name} is what `release` gives the {backend} backend from the cell "
                    "(the sms, ptx and toolchain of the matrix say it): remove it",
                )
            )
        elif is_secret_name(name):  # the build never sees credentials from the matrix
            problems.append(
                (
                    key,
                    f"{name} looks like a credential: a build never gets one (the publish "
                    "step reads credentials from its own environment)",
                )
            )
        elif name == "SOURCE_DATE_EPOCH":
            problems.append(
                (key, "SOURCE_DATE_EPOCH is set by `release build` (the last commit's time)")
            )
    for name, value in (spec.config_settings or {}).items():
        key = join_path(join_path(path, "config-settings"), name)
        if name in OWNED_SETTINGS[backend]:
            problems.append(
                (
                    key,
                    f"{name} is what `release` gives the {backend} backend from the cell: "
                    "remove it",
                )
            )
        elif backend == "cmake" and "CMAKE_CUDA_ARCHITECTURES" in value:
            problems.append(
                (key, "the GPU targets come from the cell's sms and ptx: remove them here")
            )
    return problems


def targets_problem(
    backend: Backend, sms: Sequence[GpuTarget], ptx: GpuTarget | None
) -> str | None:
    """Why `backend` cannot build exactly these targets, with the remedy; None if it can."""
    if backend in NVCC_BACKENDS:
        both = sorted(t.number for t in sms if t.suffix == "f" and GpuTarget(t.number) in sms)
        if both:
            number = both[0]
            return (
                f"nvcc stops when one compile asks for sm_{number} and sm_{number}f ('The same "
                f"GPU code generated for non family-specific and family-specific GPU arch'): "
                f"keep {number}f (it runs on every GPU of the sm_{number} family) or {number}"
            )
    if backend == "torch" and ptx is not None and GpuTarget(ptx.number) not in sms:
        return (
            f"torch's TORCH_CUDA_ARCH_LIST can only add PTX to an SM it also builds a cubin "
            f"for ({torch_arch(ptx)}+PTX): add {ptx.number} to sms, or set ptx to one of them"
        )
    return None


# --- Each backend's spelling of the GPU targets. ---


def cmake_architectures(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str:
    """CMAKE_CUDA_ARCHITECTURES: a cubin per SM (`75-real`, `90a-real`, `100f-real`) and PTX
    for the PTX target (`100-virtual`)."""
    parts = [f"{target}-real" for target in sms]
    if ptx is not None:
        parts.append(f"{ptx}-virtual")
    return ";".join(parts)


def torch_arch(target: GpuTarget) -> str:
    """A target as torch spells it: 75 -> `7.5`, 90a -> `9.0a`, 100f -> `10.0f`, 121 -> `12.1`."""
    return f"{target.number // 10}.{target.number % 10}{target.suffix}"


def torch_arch_list(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str:
    """TORCH_CUDA_ARCH_LIST: `7.5;8.0;8.6;8.9;9.0;10.0+PTX`. torch's cpp_extension turns each
    entry into `-gencode=arch=compute_XX,code=sm_XX` and a `+PTX` entry also into
    `code=compute_XX`, so PTX rides on an SM that is built too (see `targets_problem`)."""
    problem = targets_problem("torch", sms, ptx)
    if problem is not None:
        raise ValueError(problem)
    parts = []
    for target in sms:
        entry = torch_arch(target)
        if ptx is not None and target == GpuTarget(ptx.number):
            entry += "+PTX"
        parts.append(entry)
    return ";".join(parts)


# --- One cell's build inputs. ---


@dataclass(frozen=True, kw_only=True)
class NvccToolkit:
    """The nvcc a backend compiles with: `root` holds bin/nvcc and include/."""

    root: Path
    version: str
    # PyPI's nvcc wheels keep libcudart_static.a and libcudadevrt.a in lib/, where nvcc's
    # profile (-L.../lib64) does not look: the linker needs LIBRARY_PATH to find them.
    library_dir: Path | None = None

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"


@dataclass(frozen=True, kw_only=True)
class BuildTools:
    """Build tools from PyPI for the build's PATH (cmake and ninja binaries)."""

    path: tuple[Path, ...] = ()
    versions: tuple[str, ...] = ()  # `cmake 4.4.5`, `ninja 1.13.2`


@dataclass(frozen=True, kw_only=True)
class BuildInputs:
    """What a cell's PEP 517 build gets: variables, config settings, PATH entries first."""

    env: Mapping[str, str]
    config_settings: Mapping[str, str]
    path: tuple[Path, ...] = ()

    def config_args(self) -> list[str]:
        return [f"-C{key}={value}" for key, value in sorted(self.config_settings.items())]


def cmake_inputs(
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
    toolkit: NvccToolkit,
    *,
    jobs: int,
    build_backend: str | None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, config settings) of a CMake-driven build.

    CMake reads no CMAKE_CUDA_ARCHITECTURES variable from the environment: the list goes
    to CUDAARCHS (read when the cache has none), to CMAKE_ARGS (read by scikit-build-core
    and most setuptools+CMake builds, split on spaces only) and, for scikit-build-core, to
    `cmake.define.CMAKE_CUDA_ARCHITECTURES`. Never to SKBUILD_CMAKE_ARGS, which
    scikit-build-core splits on `;`: that builds the first SM alone and exits 0.
    CMake ignores CUDA_HOME: CUDACXX / CMAKE_CUDA_COMPILER name nvcc.
    """
    architectures = cmake_architectures(sms, ptx)
    env = {
        "CUDAARCHS": architectures,
        "CMAKE_ARGS": f"-DCMAKE_CUDA_ARCHITECTURES={architectures} "
        f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}",
        "CUDACXX": str(toolkit.nvcc),
        "CUDA_HOME": str(toolkit.root),
        "CUDAToolkit_ROOT": str(toolkit.root),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
    }
    settings = {}
    if build_backend == _SCIKIT_BUILD_BACKEND:
        settings = {
            "cmake.define.CMAKE_CUDA_ARCHITECTURES": architectures,
            "cmake.define.CMAKE_CUDA_COMPILER": str(toolkit.nvcc),
        }
    return env, settings


def torch_inputs(
    sms: Sequence[GpuTarget], ptx: GpuTarget | None, toolkit: NvccToolkit, *, jobs: int
) -> dict[str, str]:
    """The environment of a setuptools build with torch's CUDAExtension."""
    return {
        "TORCH_CUDA_ARCH_LIST": torch_arch_list(sms, ptx),
        "CUDA_HOME": str(toolkit.root),
        "MAX_JOBS": str(jobs),
        "NVCC_THREADS": "1" if jobs < 4 else "2",
    }


def build_inputs(
    recipe: BuildRecipe,
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
    toolkit: NvccToolkit,
    *,
    tools: BuildTools,
    jobs: int,
    build_backend: str | None,
) -> BuildInputs:
    """The inputs of one cell's build by an nvcc-driven backend (cmake, torch): the cell's
    targets in the backend's terms, the toolchain, and the matrix's own `env` and
    `config-settings` (which `spec_problems` keeps off the keys set here)."""
    if recipe.backend == "cmake":
        env, settings = cmake_inputs(sms, ptx, toolkit, jobs=jobs, build_backend=build_backend)
    elif recipe.backend == "torch":
        env, settings = torch_inputs(sms, ptx, toolkit, jobs=jobs), {}
    else:
        raise ValueError(f"the {recipe.backend} backend takes csrc's RELEASE_* inputs")
    if toolkit.library_dir is not None:
        env["LIBRARY_PATH"] = str(toolkit.library_dir)
    env.update(recipe.env)
    settings.update(recipe.config_settings)
    return BuildInputs(env=env, config_settings=settings, path=(*tools.path, toolkit.root / "bin"))


def with_path(env: Mapping[str, str], first: Sequence[Path]) -> dict[str, str]:
    """`env` with the directories `first` ahead of its PATH."""
    out = dict(env)
    out["PATH"] = os.pathsep.join([*(str(p) for p in first), *filter(None, [env.get("PATH")])])
    return out


# --- Where a cell can build. ---


def nvcc_problem(backend: Backend, cuda: str, device_compiler: str) -> str | None:
    """Why the toolchain planned for a CUDA version cannot serve `backend`: PyPI has no nvcc
    for CUDA 12.x, only NVRTC, and CMake and torch drive nvcc."""
    if backend in NVCC_BACKENDS and device_compiler != "nvcc":
        return (
            f"the {backend} backend compiles with nvcc, and PyPI has no nvcc for CUDA {cuda} "
            f"(only NVRTC, which csrc's own backend uses)"
        )
    return None


NVCC_HINT = "point --cuda-home / CUDA_HOME at a CUDA {cuda} toolkit (with bin/nvcc)"


def placement_problem(backend: Backend, target_arch: str, host_arch: str) -> str | None:
    """Why a cell of `target_arch` does not build on a `host_arch` machine; None if it does.
    csrc's backend cross-compiles its host library with zig; nvcc drives the host compiler
    of the machine it runs on, so nvcc-driven backends build each arch natively."""
    if backend in NVCC_BACKENDS and target_arch != host_arch:
        return (
            f"the {backend} backend builds {target_arch} wheels on {target_arch} machines only "
            f"(nvcc drives this {host_arch} machine's host compiler and cannot cross-compile)"
        )
    return None


PLACEMENT_HINT = (
    "build it on a native {arch} runner: the release workflow's cibuildwheel builder does "
    "(workflow_dispatch input builder: cibuildwheel), and `release env --record` checks the "
    "wheel as `release build` would"
)


def read_build_backend(pyproject_text: str) -> str | None:
    """[build-system] build-backend of a pyproject.toml's text (None if it names none)."""
    try:
        data = tomllib.loads(pyproject_text)
    except tomllib.TOMLDecodeError:
        return None
    backend = data.get("build-system", {}).get("build-backend")
    return backend if isinstance(backend, str) else None
