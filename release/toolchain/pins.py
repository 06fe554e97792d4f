"""Every tool pin in one file: the PyPI packages each CUDA version's device compiler comes
from, the CUDA libraries a cell's CUDA_HOME gets (build.cuda-libraries), the host C
compiler (zig), the fatbin inspector, the build tools of nvcc-driven backends (cmake,
ninja), and the oldest pip that provisioning works with. CI's and the
release workflow's toolchain caches are keyed by this file's hash.

CUDA 13.x builds with the full nvcc from PyPI wheels; CUDA 12.x has no nvcc on PyPI, so
it builds with NVRTC + nvFatbin (+ the runtime headers). The host library is built with
zig for both CPU arches, against glibc 2.28 (manylinux_2_28).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

GLIBC_TARGET = "2.28"
DeviceCompiler = Literal["nvcc", "nvrtc"]


@dataclass(frozen=True, order=True)
class Pin:
    """One exact package pin, e.g. nvidia-cuda-nvcc==13.0.88."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def _pins(*specs: str) -> tuple[Pin, ...]:
    return tuple(Pin(*spec.split("==")) for spec in specs)


@dataclass(frozen=True)
class CudaPins:
    compiler: DeviceCompiler
    pins: tuple[Pin, ...]


# Companion versions are those of the CUDA 13.0 Update 2 toolkit (nvcc 13.0.88).
KNOWN_CUDA: Mapping[str, CudaPins] = {
    "12.9": CudaPins(
        "nvrtc",
        _pins(
            "nvidia-cuda-nvrtc-cu12==12.9.86",
            "nvidia-nvfatbin-cu12==12.9.82",
            "nvidia-cuda-runtime-cu12==12.9.79",
        ),
    ),
    "13.0": CudaPins(
        "nvcc",
        _pins(
            "nvidia-cuda-nvcc==13.0.88",
            "nvidia-cuda-crt==13.0.88",
            "nvidia-nvvm==13.0.88",
            "nvidia-cuda-runtime==13.0.96",
            "nvidia-cuda-cccl==13.0.85",
        ),
    ),
}

# The CUDA libraries a cmake or torch cell's CUDA_HOME gets from PyPI (matrix.yaml's
# build.cuda-libraries names them as the linker does: -lnvrtc is `nvrtc`;
# release.backends.recipe.CUDA_LIBRARY_NAMES): per CUDA version, the wheels of each library
# with those its shared objects need at link time (cusolver links cublas, cusparse and
# nvJitLink), at the versions the `cuda-toolkit` metapackage of that CUDA release pins in its
# extras (13.0: cuda-toolkit==13.0.2, the Update 2 of KNOWN_CUDA's nvcc; 12.9:
# cuda-toolkit==12.9.1, the `-cu12` names). `cudart` comes with every set, with the headers
# its own headers include: crt/ (CUDA 13 ships it in nvidia-cuda-crt, CUDA 12 in
# nvidia-cuda-nvcc-cu12, whose wheel holds ptxas and those headers but no nvcc) and CCCL's
# nv/target (cuda_fp16.h includes it; CUDA 13 keeps CCCL under include/cccl/, as its
# toolkit does).
_CUDA_13_0_LIBRARIES = {
    "cudart": (
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cuda-crt==13.0.88",
        "nvidia-cuda-cccl==13.0.85",
    ),
    "nvrtc": ("nvidia-cuda-nvrtc==13.0.88",),
    "cublas": ("nvidia-cublas==13.1.0.3",),
    "cublasLt": ("nvidia-cublas==13.1.0.3",),
    "cufft": ("nvidia-cufft==12.0.0.61", "nvidia-nvjitlink==13.0.88"),
    "cufftw": ("nvidia-cufft==12.0.0.61", "nvidia-nvjitlink==13.0.88"),
    "curand": ("nvidia-curand==10.4.0.35",),
    "cusolver": (
        "nvidia-cusolver==12.0.4.66",
        "nvidia-cublas==13.1.0.3",
        "nvidia-cusparse==12.6.3.3",
        "nvidia-nvjitlink==13.0.88",
    ),
    "cusparse": ("nvidia-cusparse==12.6.3.3", "nvidia-nvjitlink==13.0.88"),
    "nvJitLink": ("nvidia-nvjitlink==13.0.88",),
    "nvfatbin": ("nvidia-nvfatbin==13.0.85",),
    "cufile": ("nvidia-cufile==1.15.1.6",),
    "nvjpeg": ("nvidia-nvjpeg==13.0.1.86",),
    "cccl": ("nvidia-cuda-cccl==13.0.85",),  # headers only: thrust, cub, libcu++
    "cuda": ("nvidia-cuda-runtime==13.0.96",),  # cuda.h: the CUDA_HOME makes a link stub
}
_CUDA_12_9_LIBRARIES = {
    "cudart": (
        "nvidia-cuda-runtime-cu12==12.9.79",
        "nvidia-cuda-nvcc-cu12==12.9.86",
        "nvidia-cuda-cccl-cu12==12.9.27",
    ),
    "nvrtc": ("nvidia-cuda-nvrtc-cu12==12.9.86",),
    "cublas": ("nvidia-cublas-cu12==12.9.1.4",),
    "cublasLt": ("nvidia-cublas-cu12==12.9.1.4",),
    "cufft": ("nvidia-cufft-cu12==11.4.1.4", "nvidia-nvjitlink-cu12==12.9.86"),
    "cufftw": ("nvidia-cufft-cu12==11.4.1.4", "nvidia-nvjitlink-cu12==12.9.86"),
    "curand": ("nvidia-curand-cu12==10.3.10.19",),
    "cusolver": (
        "nvidia-cusolver-cu12==11.7.5.82",
        "nvidia-cublas-cu12==12.9.1.4",
        "nvidia-cusparse-cu12==12.5.10.65",
        "nvidia-nvjitlink-cu12==12.9.86",
    ),
    "cusparse": ("nvidia-cusparse-cu12==12.5.10.65", "nvidia-nvjitlink-cu12==12.9.86"),
    "nvJitLink": ("nvidia-nvjitlink-cu12==12.9.86",),
    "nvfatbin": ("nvidia-nvfatbin-cu12==12.9.82",),
    "cufile": ("nvidia-cufile-cu12==1.14.1.1",),
    "nvjpeg": ("nvidia-nvjpeg-cu12==12.4.0.76",),
    "cccl": ("nvidia-cuda-cccl-cu12==12.9.27",),
    "cuda": ("nvidia-cuda-runtime-cu12==12.9.79",),
}
CUDA_LIBRARY_PINS: Mapping[str, Mapping[str, tuple[Pin, ...]]] = {
    cuda: {library: _pins(*specs) for library, specs in table.items()}
    for cuda, table in (("12.9", _CUDA_12_9_LIBRARIES), ("13.0", _CUDA_13_0_LIBRARIES))
}
RUNTIME_LIBRARY = "cudart"  # in every CUDA_HOME a cell's libraries make

ZIG_PINS = _pins("ziglang==0.17.1")
# cuobjdump is on PyPI from 13.2 on; it lists the cubins and PTX of 12.9 and 13.x fatbins.
INSPECTOR_PINS = _pins("nvidia-cuda-cuobjdump==13.2.86")


@dataclass(frozen=True)
class PinSet:
    """Packages installed together into one cache directory, named by their exact pins."""

    label: str
    pins: tuple[Pin, ...]
    host_platform: str

    @property
    def key(self) -> str:
        blob = json.dumps(
            {"pins": [str(p) for p in sorted(self.pins)], "platform": self.host_platform}
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def dirname(self) -> str:
        return f"{self.label}-{self.key}"

    @property
    def requirements(self) -> tuple[str, ...]:
        return tuple(str(p) for p in self.pins)


# Build tools of the nvcc-driven backends (cmake, torch), from PyPI.
BUILD_TOOL_PINS = (Pin("cmake", "4.4.5"), Pin("ninja", "1.13.2"))

# The oldest pip that provisioning works with: `--progress-bar raw` came in pip 24.1.
# pyproject.toml declares the same floor, so that installing this tool brings it.
PIP_FLOOR = "24.1"

# Where a cell builds in GitHub Actions (`release matrix --format github`: runs_on,
# container): a hosted runner of the cell's CPU arch; an aarch64 cell in a manylinux
# container of its level, one build date for every level and arch (pypa/manylinux tags them
# together).
HOSTED_RUNNERS: Mapping[str, str] = {"x86_64": "ubuntu-24.04", "aarch64": "ubuntu-24.04-arm"}
MANYLINUX_IMAGE = "quay.io/pypa/manylinux_{level}_{arch}:2025.11.11-1"


@dataclass(frozen=True)
class ToolkitImage:
    """A container image that carries a CUDA toolkit, for the nvcc-driven backends (cmake,
    torch) of a CUDA version PyPI has no nvcc for. Pulled by digest only: a tag can move."""

    name: str
    tag: str  # what the digest was read from, for people (`docker buildx imagetools inspect`)
    digest: str | None  # sha256:<64 hex>; None until someone with registry access pins it
    cuda_home: str

    @property
    def reference(self) -> str | None:
        return f"{self.name}@{self.digest}" if self.digest else None


# The PyPA's manylinux CUDA images (quay.io/manylinux_cuda, the ones cibuildwheel's docs point
# to): one repository per manylinux level, arch and CUDA version, with the toolkit as NVIDIA's
# rpm packages install it (/usr/local/cuda-X.Y) and the CPythons in /opt/python like pypa's
# images. A cell builds in the one of its own level, so the container's glibc is the one its
# wheel's tag names. They are published under the tag `latest` only, and a digest cannot be
# read from a machine without registry access: until one is pinned here, a cell that needs
# an image is refused with the remedy (matrix.yaml's toolkit-image, by digest).
MANYLINUX_CUDA_IMAGE = "quay.io/manylinux_cuda/manylinux_{level}_{arch}_cuda{cuda}"
CUDA_TOOLKIT_IMAGES: Mapping[tuple[str, str, str], ToolkitImage] = {
    (cuda, arch, level): ToolkitImage(
        MANYLINUX_CUDA_IMAGE.format(level=level, arch=arch, cuda=cuda.replace(".", "_")),
        "latest",
        None,
        f"/usr/local/cuda-{cuda}",
    )
    for cuda in ("12.9",)
    for arch in ("x86_64", "aarch64")
    for level in ("2_28", "2_34")
}
