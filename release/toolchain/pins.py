"""Every tool pin in one file: the PyPI packages each CUDA version's device compiler comes
from, the host C compiler (zig), the fatbin inspector, the build tools of nvcc-driven
backends (cmake, ninja), and the oldest pip that provisioning works with. CI's and the
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
