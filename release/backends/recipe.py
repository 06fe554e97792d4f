"""The `build:` section of matrix.yaml and the recipe a CUDA version builds with: which
backend, the matrix's own variables and config settings for it, the build requirements it
adds to the cell's build environment, and the CUDA libraries its CUDA_HOME gets.

Pure: the `BuildSpec` of the document (yamlspec loads it and writes its schema) and the
recipe of a CUDA version (`merge`: its own `build` over the release's, key by key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal, get_args

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from release.yamlspec import optional

BackendName = Literal["release", "cmake", "torch"]
BACKEND_NAMES: tuple[BackendName, ...] = get_args(BackendName)
DEFAULT_BACKEND: BackendName = "release"
# The CUDA libraries a build may link or include, as the linker names them (-lnvrtc is
# `nvrtc`); `cccl` is the header-only thrust, cub and libcu++; `cuda` is the driver API's
# libcuda, which the NVIDIA driver installs and no wheel carries: the CUDA_HOME gets a link
# stub of it (release.toolchain.cudahome) and the wheel may need libcuda.so.1.
# release.toolchain.pins says which PyPI wheels each comes from, per CUDA version.
CudaLibraryName = Literal[
    "cudart", "nvrtc", "cublas", "cublasLt", "cufft", "cufftw", "curand", "cusolver",
    "cusparse", "nvJitLink", "nvfatbin", "cufile", "nvjpeg", "cccl", "cuda",
]  # fmt: skip
CUDA_LIBRARY_NAMES: tuple[CudaLibraryName, ...] = get_args(CudaLibraryName)
DRIVER_LIBRARY: CudaLibraryName = "cuda"
# where a CUDA_HOME holds the driver's link stub: a CUDA toolkit's, and the one
# release.toolchain.cudahome makes (its lib64 is a link to lib)
DRIVER_STUB = PurePosixPath("lib64", "stubs", "libcuda.so")
# How a variable of `targets-env` spells the cell's GPU targets: `sms`, the SMs as the matrix
# writes them (`80;90;100`: flash-attention's FLASH_ATTN_CUDA_ARCHS, which builds PTX for the
# highest itself); `torch-arch-list`, TORCH_CUDA_ARCH_LIST's value (`8.0;9.0;10.0+PTX`).
TargetsFormat = Literal["sms", "torch-arch-list"]


@dataclass(frozen=True)
class BuildSpec:
    """How the kernel project is built, and what its build gets besides the cell."""

    backend: BackendName | None = optional(
        "release (csrc's RELEASE_* contract), cmake or torch; default release"
    )
    env: dict[str, str] | None = optional("environment variables of the build")
    targets_env: dict[str, TargetsFormat] | None = optional(
        "variables the project's build reads its GPU targets from, each given the cell's "
        "targets in its format: sms (80;90;100) or torch-arch-list (8.0;9.0;10.0+PTX)"
    )
    config_settings: dict[str, str] | None = optional(
        "PEP 517 config settings (-C KEY=VALUE) of the build"
    )
    requires: list[str] | None = optional(
        "build requirements (PEP 508) the cell's build environment gets besides the "
        "project's own [build-system] requires: apache-tvm-ffi==0.1.9"
    )
    cuda_libraries: list[CudaLibraryName] | None = optional(
        "CUDA libraries the project links or includes (nvrtc, cublas, cublasLt, ...): the "
        "CUDA_HOME of a cmake or torch cell gets each from PyPI's wheels for its CUDA version, "
        "with its headers and its unversioned link name (libnvrtc.so); cuda, the NVIDIA "
        "driver's libcuda, as a link stub (lib64/stubs/libcuda.so), and the wheel may then "
        "need libcuda.so.1 (it imports only where a driver is installed)"
    )
    compile_jobs: int | None = optional(
        "compiles a cell's build runs at once (default: from the CPUs and the memory "
        "available, 3 GiB a compile)"
    )
    prepare: PrepareSpec | None = optional(
        "the release's: a command run before each cell's PEP 517 build (a script that "
        "stages the distribution), with the version written where the project reads it"
    )


@dataclass(frozen=True, kw_only=True)
class BuildRecipe:
    """The build of one CUDA version: the backend, and the matrix's own variables and
    config settings (sorted pairs, so that a cell stays hashable)."""

    backend: BackendName = DEFAULT_BACKEND
    env: tuple[tuple[str, str], ...] = ()
    targets_env: tuple[tuple[str, TargetsFormat], ...] = ()
    config_settings: tuple[tuple[str, str], ...] = ()
    requires: tuple[str, ...] = ()
    cuda_libraries: tuple[CudaLibraryName, ...] = ()
    compile_jobs: int | None = None
    prepare: PrepareSpec | None = None


def merge(release: BuildSpec | None, cuda: BuildSpec | None) -> BuildRecipe:
    """A CUDA version's recipe: its own `build` over the release's, key by key (`env`,
    `targets-env` and `config-settings` merge, the CUDA version's value winning; `requires` merge by
    distribution name, the CUDA version's requirement winning; `cuda-libraries` add up;
    `prepare` is the release's alone)."""
    backend: BackendName = DEFAULT_BACKEND
    env: dict[str, str] = {}
    targets: dict[str, TargetsFormat] = {}
    settings: dict[str, str] = {}
    requires: dict[str, str] = {}
    libraries: dict[CudaLibraryName, None] = {}
    jobs: int | None = None
    for spec in (release, cuda):
        if spec is None:
            continue
        backend = spec.backend or backend
        env.update(spec.env or {})
        targets.update(spec.targets_env or {})
        settings.update(spec.config_settings or {})
        requires.update((requirement_key(text), text) for text in spec.requires or ())
        libraries.update(dict.fromkeys(spec.cuda_libraries or ()))
        jobs = spec.compile_jobs if spec.compile_jobs is not None else jobs
    return BuildRecipe(
        backend=backend,
        env=tuple(sorted(env.items())),
        targets_env=tuple(sorted(targets.items())),
        config_settings=tuple(sorted(settings.items())),
        requires=tuple(requires.values()),
        cuda_libraries=tuple(sorted(libraries, key=CUDA_LIBRARY_NAMES.index)),
        compile_jobs=jobs,
        prepare=release.prepare if release is not None else None,
    )


@dataclass(frozen=True)
class PrepareSpec:
    """The release's prepare step: a command run before each cell's PEP 517 build, from the
    directory of matrix.yaml, in the cell's build environment (docs/matrix.md;
    release.building.preparestep runs it)."""

    command: str = field(
        metadata={
            "doc": "the command, split as a shell would split it but run without one "
            "(bash build_x.sh); from matrix.yaml's directory, in the cell's build environment"
        }
    )
    version_file: str | None = optional(
        "a file (relative to matrix.yaml's directory) the cell's version is written into "
        "before the command, and put back after the build; the release's version is read "
        "from it where the project's files compute theirs"
    )
    output: str | None = optional(
        "the directory (relative to matrix.yaml's directory) the command stages the "
        "distribution in: its pyproject.toml is what the PEP 517 build builds; release "
        "empties it before the command and removes it after the build (default: the project)"
    )
    timeout: int | None = optional(
        "seconds the command may run before it is stopped and the cell fails (default: 3600)"
    )


def requirement_key(text: str) -> str:
    """The distribution a build requirement names (canonical), or the text itself where it
    is not one (release.backends.rules reports that)."""
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return text
