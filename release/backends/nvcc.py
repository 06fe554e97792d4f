"""What the backends that drive nvcc (cmake, torch) share: PyPI has no nvcc for CUDA 12.x,
nvcc drives the build machine's host compiler (so each CPU arch builds natively), one
compile cannot build sm_N with sm_Nf, and the wheel's glibc is the build machine's.
"""

from __future__ import annotations

from collections.abc import Sequence

from release.backends.archflags import cell_request, to_cmake
from release.backends.base import BuildContext, NvccToolkit
from release.errors import ToolchainError
from release.targets import GpuTarget

NVCC_HINT = "point --cuda-home / CUDA_HOME at a CUDA {cuda} toolkit (with bin/nvcc)"
PLACEMENT_HINT = (
    "build it with `release build --arch {arch}` on a native {arch} runner, in a manylinux "
    "container of the cell's level: the reusable workflow wheels.yml does (docs/ci.md)"
)
NVCC_TAG_REMEDY = (
    " (nvcc links against this machine's glibc: set the cell's manylinux to the "
    "level auditwheel finds, or build in a manylinux container of that level)"
)


def compress_flags(mode: str | None) -> list[str]:
    """nvcc's flag for the matrix's compress-mode (none where the matrix sets none)."""
    return [] if mode is None else [f"--compress-mode={mode}"]


def family_problem(sms: Sequence[GpuTarget]) -> str | None:
    """nvcc stops when one compile asks for sm_N and sm_Nf."""
    both = sorted(t.number for t in sms if t.suffix == "f" and GpuTarget(t.number) in sms)
    if not both:
        return None
    number = both[0]
    return (
        f"nvcc stops when one compile asks for sm_{number} and sm_{number}f ('The same "
        f"GPU code generated for non family-specific and family-specific GPU arch'): "
        f"keep {number}f (it runs on every GPU of the sm_{number} family) or {number}"
    )


def missing_nvcc(backend: str, cuda: str, device_compiler: str) -> str | None:
    """Why the toolchain planned for a CUDA version cannot serve nvcc-driven `backend`: PyPI
    has no nvcc for CUDA 12.x, only NVRTC."""
    if device_compiler != "nvcc":
        return (
            f"the {backend} backend compiles with nvcc, and PyPI has no nvcc for CUDA {cuda} "
            f"(only NVRTC, which csrc's own backend uses)"
        )
    return None


def cross_problem(backend: str, target_arch: str, host_arch: str) -> str | None:
    """Why nvcc-driven `backend` does not build `target_arch` on a `host_arch` machine: nvcc
    drives the host compiler of the machine it runs on."""
    if target_arch != host_arch:
        return (
            f"the {backend} backend builds {target_arch} wheels on {target_arch} machines only "
            f"(nvcc drives this {host_arch} machine's host compiler and cannot cross-compile)"
        )
    return None


def require_toolkit(context: BuildContext, backend: str, cuda: str) -> NvccToolkit:
    if context.toolkit is None:
        raise ToolchainError(
            f"CUDA {cuda}: this toolchain has no nvcc, which the {backend} backend drives",
            hint=NVCC_HINT.format(cuda=cuda),
        )
    return context.toolkit


WRAPPER_MODULE = "release.toolchain.nvccwrap"
# what the compile wrapper reads (release.toolchain.nvccwrap)
CHECK_VARIABLES = frozenset(
    {
        "RELEASE_CELL_TARGETS",
        "RELEASE_CELL_CUDA",
        "RELEASE_ARCH_STOP",
        "RELEASE_NVCC_PYTHON",
        "RELEASE_COMPILE_RECORDS",
        "RELEASE_NVCC_SCRIPT",
        "RELEASE_NVCC_REAL",
    }
)


def check_inputs(
    sms: Sequence[GpuTarget], ptx: GpuTarget | None, cuda: str, context: BuildContext
) -> dict[str, str]:
    """What the compile wrapper needs to hold each compile to the cell's targets: the Python
    that runs it, the cell's request (in CMake's spelling), its CUDA (nvcc's default
    target) and where the first stop is recorded; nothing where the context names no tool
    Python (then no compile goes through the wrapper)."""
    if context.tool_python is None:
        return {}
    env = {
        "RELEASE_NVCC_PYTHON": str(context.tool_python),
        "RELEASE_CELL_TARGETS": to_cmake(cell_request(sms, ptx)),
        "RELEASE_CELL_CUDA": cuda,
    }
    if context.arch_stop is not None:
        env["RELEASE_ARCH_STOP"] = str(context.arch_stop)
    if context.compile_records is not None:
        env["RELEASE_COMPILE_RECORDS"] = str(context.compile_records)
    return env
