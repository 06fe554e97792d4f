"""The tools a cell builds with: every pin (pins), the plan of a cell's toolchain (plan), and
provisioning it into the cache (provision). Import from here."""

from __future__ import annotations

from release.toolchain.pins import (
    BUILD_TOOL_PINS,
    GLIBC_TARGET,
    INSPECTOR_PINS,
    KNOWN_CUDA,
    PIP_FLOOR,
    ZIG_PINS,
    CudaPins,
    DeviceCompiler,
    Pin,
    PinSet,
)
from release.toolchain.plan import (
    Toolchain,
    ToolchainPlan,
    ToolchainSpec,
    check_cuda_version,
    host_machine,
    host_platform,
    parse_release_version,
    present_dirs,
    resolve,
    toolchain_spec,
    zig_target,
)
from release.toolchain.provision import (
    Progress,
    check_pip,
    install_pinset,
    parse_pip_version,
    pip_problem,
    provision,
)

__all__ = [
    "BUILD_TOOL_PINS",
    "GLIBC_TARGET",
    "INSPECTOR_PINS",
    "KNOWN_CUDA",
    "PIP_FLOOR",
    "ZIG_PINS",
    "CudaPins",
    "DeviceCompiler",
    "Pin",
    "PinSet",
    "Progress",
    "Toolchain",
    "ToolchainPlan",
    "ToolchainSpec",
    "check_cuda_version",
    "check_pip",
    "host_machine",
    "host_platform",
    "install_pinset",
    "parse_pip_version",
    "parse_release_version",
    "pip_problem",
    "present_dirs",
    "provision",
    "resolve",
    "toolchain_spec",
    "zig_target",
]
