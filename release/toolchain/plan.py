"""The toolchain of a cell, pure: which pinned package sets a (CUDA version, CPU arch)
needs (`toolchain_spec`), the CUDA libraries a cell's CUDA_HOME gets (`library_pinset`),
the plan for one cell (`resolve`; `cuda_home` selects a system toolkit instead), the
RELEASE_* build environment (`Toolchain.build_env`), what a toolchain is independent of
where it lives (`Toolchain.identity`), and the parsers of tool output.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release import proc
from release.backends import DRIVER_LIBRARY
from release.errors import ToolchainError
from release.targets import ARCHES
from release.toolchain.pins import (
    CUDA_LIBRARY_PINS,
    GLIBC_TARGET,
    INSPECTOR_PINS,
    KNOWN_CUDA,
    RUNTIME_LIBRARY,
    ZIG_PINS,
    DeviceCompiler,
    PinSet,
)


@dataclass(frozen=True)
class ToolchainSpec:
    """The PyPI device toolchain of one CUDA version on one host arch."""

    cuda: str
    host_arch: str
    device_compiler: DeviceCompiler
    packages: PinSet

    @property
    def key(self) -> str:
        return self.packages.key


def host_platform(arch: str) -> str:
    return f"linux_{arch}"


def _check_arch(arch: str, what: str) -> None:
    if arch not in ARCHES:
        raise ToolchainError(
            f"{what} {arch!r} is not supported", hint=f"use one of: {', '.join(ARCHES)}"
        )


def toolchain_spec(cuda: str, host_arch: str) -> ToolchainSpec:
    _check_arch(host_arch, "host arch")
    known = KNOWN_CUDA.get(cuda)
    if known is None:
        raise ToolchainError(
            f"no PyPI toolchain is known for CUDA {cuda!r} (known: {', '.join(KNOWN_CUDA)})",
            hint="pick a known CUDA version, or point --cuda-home / CUDA_HOME at a toolkit",
        )
    label = f"cuda-{cuda}-{known.compiler}"
    return ToolchainSpec(
        cuda=cuda,
        host_arch=host_arch,
        device_compiler=known.compiler,
        packages=PinSet(label, known.pins, host_platform(host_arch)),
    )


def library_pinset(cuda: str, host_arch: str, names: Sequence[str]) -> PinSet:
    """The wheels of the CUDA libraries `names` (and of the runtime, which every CUDA_HOME
    holds) for CUDA `cuda`, as one package set."""
    known = CUDA_LIBRARY_PINS.get(cuda)
    if known is None:
        raise ToolchainError(
            f"no PyPI wheels of CUDA libraries are known for CUDA {cuda!r} "
            f"(known: {', '.join(CUDA_LIBRARY_PINS)})",
            hint="pick a known CUDA version, or point --cuda-home / CUDA_HOME at a toolkit",
        )
    wanted = dict.fromkeys((RUNTIME_LIBRARY, *names))
    pins = sorted({pin for name in wanted for pin in known[name]})
    return PinSet(f"cuda-{cuda}-libraries", tuple(pins), host_platform(host_arch))


@dataclass(frozen=True)
class ToolchainPlan:
    """What a cell will build with, and where each tool comes from. Nothing is probed yet.

    `device` is None when a system toolkit (`cuda_home`) is used; `host_cc` is None when
    a system C compiler (`system_cc`) is used. `libraries` are the wheels of the CUDA
    libraries (`library_names`) that the CUDA_HOME of a cmake or torch cell gets besides
    the toolkit (None: the toolkit's own tree is its CUDA_HOME); with an NVRTC device
    compiler, that CUDA_HOME has no nvcc.
    """

    cuda: str
    target_arch: str
    host_arch: str
    device_compiler: DeviceCompiler
    device: PinSet | None
    cuda_home: Path | None
    host_cc: PinSet | None
    system_cc: tuple[str, ...] | None
    inspector: PinSet
    cache_dir: Path
    libraries: PinSet | None = None
    library_names: tuple[str, ...] = ()

    def install_dir(self, pinset: PinSet) -> Path:
        return self.cache_dir / pinset.dirname

    @property
    def pinsets(self) -> tuple[PinSet, ...]:
        sets = (self.device, self.host_cc, self.inspector, self.libraries)
        return tuple(p for p in sets if p is not None)

    def libraries_text(self) -> str | None:
        """What the CUDA_HOME made of its libraries holds, for people (None: no such one)."""
        if self.libraries is None:
            return None
        names = [
            "the driver's libcuda (a link stub)" if n == DRIVER_LIBRARY else n
            for n in self.library_names
        ]
        return (
            f"CUDA_HOME with {', '.join(names) or 'the runtime'} (PyPI "
            f"{', '.join(self.libraries.requirements)})"
        )


def resolve(
    cuda: str,
    target_arch: str,
    *,
    cuda_home: Path | None,
    cache_dir: Path,
    host_arch: str | None = None,
    system_cc: Sequence[str] | None = None,
    cuda_libraries: Sequence[str] = (),
    builds_in_cuda_home: bool = False,
) -> ToolchainPlan:
    """Decide the toolchain of one cell. A system toolkit (`cuda_home`) wins over PyPI.

    `host_arch` defaults to this machine's; `system_cc` replaces zig with a C compiler
    command (it must target `target_arch`). A cell that `builds_in_cuda_home` (cmake,
    torch) gets the wheels of its `cuda_libraries` for that CUDA_HOME, and where PyPI has
    no nvcc for its CUDA version, a CUDA_HOME of those libraries (and the runtime) alone.
    """
    host_arch = host_arch or host_machine()
    if not re.fullmatch(r"\d{1,2}\.\d{1,2}", cuda):
        raise ToolchainError(
            f"CUDA version {cuda!r} is not of the form MAJOR.MINOR", hint="write e.g. 12.9"
        )
    _check_arch(target_arch, "target arch")
    _check_arch(host_arch, "host arch")
    platform_tag = host_platform(host_arch)
    device: PinSet | None
    compiler: DeviceCompiler
    if cuda_home is not None:
        device, compiler = None, "nvcc"
    else:
        spec = toolchain_spec(cuda, host_arch)
        device, compiler = spec.packages, spec.device_compiler
    cc = tuple(system_cc) if system_cc else None
    names = tuple(dict.fromkeys(cuda_libraries))
    libraries = None
    if builds_in_cuda_home and cuda_home is None and (names or compiler != "nvcc"):
        libraries = library_pinset(cuda, host_arch, names)
    return ToolchainPlan(
        cuda=cuda,
        target_arch=target_arch,
        host_arch=host_arch,
        device_compiler=compiler,
        device=device,
        cuda_home=cuda_home,
        host_cc=None if cc else PinSet("zig", ZIG_PINS, platform_tag),
        system_cc=cc,
        inspector=PinSet("cuobjdump", INSPECTOR_PINS, platform_tag),
        cache_dir=cache_dir,
        libraries=libraries,
        library_names=names if libraries is not None else (),
    )


def zig_target(arch: str) -> str:
    return f"{arch}-linux-gnu.{GLIBC_TARGET}"


# ---------------------------------------------------------------- provisioned toolchains


@dataclass(frozen=True)
class Toolchain:
    """A provisioned toolchain: real paths and the versions the tools reported."""

    plan: ToolchainPlan
    device_version: str
    cuda_home: Path | None
    nvrtc_lib: Path | None
    nvfatbin_lib: Path | None
    include_dirs: tuple[Path, ...]
    cc: tuple[str, ...]
    cc_version: str
    cuobjdump: Path
    inspector_version: str
    installed: tuple[str, ...] = field(default=())  # cache dirs this provision filled
    # the CUDA_HOME a cmake or torch cell builds with where the plan has `libraries` (the
    # toolkit with those libraries, or those libraries alone: release.toolchain.cudahome)
    build_home: Path | None = None

    @property
    def identity(self) -> dict[str, str]:
        """What the built bytes depend on, without any path: the same toolchain provisioned
        into another cache (or restored there from a CI cache) has the same identity."""
        device = self.plan.device.requirements if self.plan.device else ("system toolkit",)
        host_cc = (
            f"zig {self.cc_version} -target {zig_target(self.plan.target_arch)}"
            if self.plan.host_cc is not None
            else f"{Path(self.cc[0]).name} {self.cc_version}"
        )
        identity = {
            "device_compiler": f"{self.plan.device_compiler} {self.device_version}",
            "device_packages": " ".join(device),
            "host_cc": host_cc,
        }
        if self.plan.libraries is not None:  # only where set: other keys stay as they were
            identity["cuda_libraries"] = " ".join(self.plan.libraries.requirements)
        return identity

    def build_env(self) -> dict[str, str]:
        """The RELEASE_* inputs of the csrc build (csrc/BUILDING.md) for this toolchain."""
        env = {
            "RELEASE_DEVICE_COMPILER": self.plan.device_compiler,
            "RELEASE_CUDA_VERSION": self.plan.cuda,
            "RELEASE_TARGET_ARCH": self.plan.target_arch,
            "RELEASE_CC": shlex.join(self.cc),
        }
        if self.cuda_home is not None:
            env["RELEASE_CUDA_HOME"] = str(self.cuda_home)
        if self.nvrtc_lib is not None:
            env["RELEASE_NVRTC_LIB"] = str(self.nvrtc_lib)
        if self.nvfatbin_lib is not None:
            env["RELEASE_NVFATBIN_LIB"] = str(self.nvfatbin_lib)
        if self.include_dirs:
            env["RELEASE_CUDA_INCLUDE"] = os.pathsep.join(str(d) for d in self.include_dirs)
        if self.plan.host_cc is not None:
            # zig keeps its compiled libc stubs here: shared by every build, not in $HOME.
            env["ZIG_GLOBAL_CACHE_DIR"] = str(self.plan.cache_dir / "zig-global-cache")
        return env


def check_cuda_version(plan: ToolchainPlan, tool: str, where: Path, reported: str) -> None:
    if ".".join(reported.split(".")[:2]) != plan.cuda:
        raise ToolchainError(
            f"CUDA {plan.cuda} cell: {tool} at {where} reports CUDA {reported}",
            hint=(
                f"point --cuda-home / CUDA_HOME at a CUDA {plan.cuda} toolkit, or unset it "
                "to use the pinned PyPI toolchain"
                if plan.cuda_home is not None
                else "the toolchain cache is damaged: delete it and provision again"
            ),
        )


def parse_release_version(output: str) -> str:
    """`Cuda compilation tools, release 13.0, V13.0.88` -> `13.0.88`."""
    match = re.search(r"\bV(\d+\.\d+\.\d+)", output)
    if match is None:
        raise ToolchainError(f"cannot read a CUDA version from: {proc.one_line_tail(output, 4)}")
    return match.group(1)


def host_machine() -> str:
    """This host's CPU arch in the matrix's spelling."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def present_dirs(plans: Sequence[ToolchainPlan]) -> frozenset[Path]:
    """The cache dirs of these plans that hold a complete install, and the system toolkits
    they name that hold bin/nvcc (for `doctor_rows`)."""
    toolkits = {p.cuda_home for p in plans if p.cuda_home is not None}
    return frozenset(
        plan.install_dir(p)
        for plan in plans
        for p in plan.pinsets
        if (plan.install_dir(p) / ".complete").is_file()
    ) | {home for home in toolkits if (home / "bin" / "nvcc").is_file()}
