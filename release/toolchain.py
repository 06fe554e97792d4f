"""Toolchains per cell: which compilers a (CUDA version, CPU arch) needs, and where from.

Pure core: the pinned PyPI packages of every known CUDA version (`toolchain_spec`), the
plan for one cell (`resolve`), the RELEASE_* build environment (`Toolchain.build_env`),
what a toolchain is independent of where it lives (`Toolchain.identity`) and the parsers
of tool output.

Edge: `provision` installs pinned wheels into the cache once (pip --target into a temp
dir, then a rename) and probes every tool's real version, through a `proc.Runner`.

CUDA 13.x builds with the full nvcc from PyPI wheels; CUDA 12.x has no nvcc on PyPI, so
it builds with NVRTC + nvFatbin (+ the runtime headers). `cuda_home` selects a system
toolkit (nvcc) for any CUDA version instead. The host library is built with zig for
both CPU arches, against glibc 2.28 (manylinux_2_28).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from release import proc
from release.errors import ToolchainError
from release.targets import ARCHES

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


@dataclass(frozen=True)
class ToolchainPlan:
    """What a cell will build with, and where each tool comes from. Nothing is probed yet.

    `device` is None when a system toolkit (`cuda_home`) is used; `host_cc` is None when
    a system C compiler (`system_cc`) is used.
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

    def install_dir(self, pinset: PinSet) -> Path:
        return self.cache_dir / pinset.dirname

    @property
    def pinsets(self) -> tuple[PinSet, ...]:
        return tuple(p for p in (self.device, self.host_cc, self.inspector) if p is not None)


def resolve(
    cuda: str,
    target_arch: str,
    *,
    cuda_home: Path | None,
    cache_dir: Path,
    host_arch: str | None = None,
    system_cc: Sequence[str] | None = None,
) -> ToolchainPlan:
    """Decide the toolchain of one cell. A system toolkit (`cuda_home`) wins over PyPI.

    `host_arch` defaults to this machine's; `system_cc` replaces zig with a C compiler
    command (it must target `target_arch`).
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
    )


def zig_target(arch: str) -> str:
    return f"{arch}-linux-gnu.{GLIBC_TARGET}"


def default_cache_dir(env: Mapping[str, str], home: Path) -> Path:
    """$RELEASE_CACHE_DIR, else $XDG_CACHE_HOME/cuda-wheel-release, else ~/.cache/..."""
    if env.get("RELEASE_CACHE_DIR"):
        return Path(env["RELEASE_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "cuda-wheel-release"
    return home / ".cache" / "cuda-wheel-release"


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
        return {
            "device_compiler": f"{self.plan.device_compiler} {self.device_version}",
            "device_packages": " ".join(device),
            "host_cc": host_cc,
        }

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


# ---------------------------------------------------------------- edge: provisioning


def _checked(runner: proc.Runner, cmd: Sequence[str], what: str, env: Mapping[str, str]) -> str:
    result = runner(cmd, env=env, separate_stderr=True)
    if result.returncode != 0:
        raise ToolchainError(proc.failure(what, result))
    return result.output


# The oldest pip that provisioning works with: `--progress-bar raw` came in pip 24.1.
# pyproject.toml declares the same floor, so that installing this tool brings it.
PIP_FLOOR = "24.1"
_PIP_VERSION = re.compile(r"^pip (\S+) from ")


def parse_pip_version(output: str) -> str | None:
    """`pip 23.2.1 from /x/site-packages/pip (python 3.11)` -> `23.2.1`."""
    match = _PIP_VERSION.match(output.strip())
    return match.group(1) if match else None


def pip_problem(version: str | None) -> str | None:
    """Why a pip of `version` (None: no pip at all) cannot provision, or None."""
    if version is None:
        return "has no pip"
    try:
        if Version(version) >= Version(PIP_FLOOR):
            return None
    except InvalidVersion:
        return f"has a pip whose version cannot be read ({version!r})"
    return f"has pip {version}, older than {PIP_FLOOR}, the oldest that provisioning works with"


def check_pip(runner: proc.Runner, *, python: str, env: Mapping[str, str]) -> None:
    """Stop before any download when `python`'s pip is missing or older than PIP_FLOOR."""
    result = runner([python, "-m", "pip", "--version"], env=env, separate_stderr=True)
    problem = pip_problem(parse_pip_version(result.output) if result.ok else None)
    if problem is not None:
        raise ToolchainError(
            f"{python} {problem}",
            hint=f"{python} -m pip install --upgrade 'pip>={PIP_FLOOR}' "
            "(installing cuda-wheel-release with pip brings it)",
        )


Progress = Callable[[str, int, int], None]
"""(what, bytes done, bytes in all) of a download."""
_PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")


def install_pinset(
    pinset: PinSet,
    dest: Path,
    runner: proc.Runner,
    *,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> bool:
    """Install `pinset` into `dest` unless it is there; True when this call installed it."""
    marker = dest / ".complete"
    if marker.is_file():
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        cmd = [
            python,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--only-binary=:all:",
            "--no-compile",
            "--disable-pip-version-check",
            "--progress-bar",
            "raw",
            "--target",
            str(tmp),
            *pinset.requirements,
        ]
        downloads: dict[str, tuple[int, int]] = {}
        current = [pinset.label]

        def on_line(line: str) -> None:
            if line.strip().startswith("Downloading "):
                wheel = line.split()[1].rsplit("/", 1)[-1]
                current[0] = " ".join(wheel.split("-")[:2])  # "ziglang 0.17.1"
            match = _PIP_PROGRESS.match(line.strip())
            if match and progress is not None:
                downloads[current[0]] = (int(match[1]), int(match[2]))
                done = sum(d for d, _ in downloads.values())
                total = sum(t for _, t in downloads.values())
                progress(f"{pinset.label}: {current[0]}", done, total)

        result = runner(cmd, env=env, separate_stderr=True, on_line=on_line)
        if result.returncode != 0:
            what = f"pip installing {', '.join(pinset.requirements)}"
            rejected = proc.rejected_arguments(result.stderr + result.output) is not None
            raise ToolchainError(
                proc.failure(what, result),
                hint=(
                    f"this pip does not take an option that release passes: "
                    f"{python} -m pip install --upgrade 'pip>={PIP_FLOOR}'"
                    if rejected
                    else "check that PyPI is reachable and has wheels for this platform"
                ),
            )
        (tmp / ".complete").write_text(json.dumps(pinset.requirements) + "\n")
        try:
            tmp.rename(dest)
        except OSError:
            if not marker.is_file():
                raise
            return False  # a concurrent provision finished first; use its copy
        return True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _installed_version(root: Path, prefix: str) -> str | None:
    """The version of the installed distribution whose name starts with `prefix`."""
    wanted = re.sub(r"[-_.]+", "_", prefix).lower()
    for info in sorted(root.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        if re.sub(r"[-_.]+", "_", name).lower().startswith(wanted):
            return version
    return None


def _one(paths: list[Path], what: str, where: Path) -> Path:
    if not paths:
        raise ToolchainError(
            f"{what} not found in {where}",
            hint="the toolchain cache is incomplete: delete that directory and provision again",
        )
    return sorted(paths)[0]


_PROBE_NVRTC = """
import ctypes, sys
rtc, fat = ctypes.CDLL(sys.argv[1]), ctypes.CDLL(sys.argv[2])
a, b = ctypes.c_int(), ctypes.c_int()
c, d = ctypes.c_uint(), ctypes.c_uint()
assert rtc.nvrtcVersion(ctypes.byref(a), ctypes.byref(b)) == 0
assert fat.nvFatbinVersion(ctypes.byref(c), ctypes.byref(d)) == 0
print(f"{a.value}.{b.value} {c.value}.{d.value}")
"""


def provision(
    plan: ToolchainPlan,
    runner: proc.Runner = proc.run,
    *,
    python: str = sys.executable,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> Toolchain:
    """Install what the plan pins (once per cache), probe every tool, check CUDA versions.
    `env` is the environment of pip and the probes; `progress` hears of downloads."""
    environ = dict(env)

    def checked(cmd: Sequence[str], what: str) -> str:
        return _checked(runner, cmd, what, environ)

    if any(not (plan.install_dir(p) / ".complete").is_file() for p in plan.pinsets):
        check_pip(runner, python=python, env=environ)
    installed = tuple(
        plan.install_dir(p).name
        for p in plan.pinsets
        if install_pinset(
            p, plan.install_dir(p), runner, python=python, env=environ, progress=progress
        )
    )

    nvrtc_lib = nvfatbin_lib = None
    include_dirs: tuple[Path, ...] = ()
    cuda_home: Path | None
    if plan.device is None:
        cuda_home = plan.cuda_home or Path("/usr/local/cuda")
        nvcc = cuda_home / "bin" / "nvcc"
        if not nvcc.is_file():
            raise ToolchainError(
                f"{nvcc} does not exist",
                hint="--cuda-home / CUDA_HOME must be a CUDA toolkit root (with bin/nvcc)",
            )
        device_version = parse_release_version(checked([str(nvcc), "--version"], "nvcc"))
        check_cuda_version(plan, "nvcc", nvcc, device_version)
    elif plan.device_compiler == "nvcc":
        root = plan.install_dir(plan.device)
        nvcc = _one(list(root.glob("nvidia/*/bin/nvcc")), "nvcc", root)
        cuda_home = nvcc.parent.parent
        device_version = parse_release_version(checked([str(nvcc), "--version"], "nvcc"))
        check_cuda_version(plan, "nvcc", nvcc, device_version)
    else:
        root = plan.install_dir(plan.device)
        cuda_home = None
        nvrtc_lib = _one(list(root.glob("nvidia/*/lib/libnvrtc.so.*[0-9]")), "libnvrtc", root)
        nvfatbin_lib = _one(list(root.glob("nvidia/*/lib/libnvfatbin.so.*")), "libnvfatbin", root)
        header = _one(list(root.glob("nvidia/*/include/cuda_fp16.h")), "cuda_fp16.h", root)
        include_dirs = (header.parent,)
        probe = checked(
            [python, "-c", _PROBE_NVRTC, str(nvrtc_lib), str(nvfatbin_lib)],
            "NVRTC/nvFatbin version probe",
        ).split()
        check_cuda_version(plan, "NVRTC", nvrtc_lib, probe[0])
        check_cuda_version(plan, "nvFatbin", nvfatbin_lib, probe[1])
        device_version = _installed_version(root, "nvidia-cuda-nvrtc") or probe[0]

    if plan.host_cc is None:
        cc = plan.system_cc or ("cc",)
        first = checked([*cc, "--version"], f"{cc[0]} --version").splitlines()
        cc_version = first[0].strip() if first else "unknown"
    else:
        root = plan.install_dir(plan.host_cc)
        zig = _one(list(root.glob("ziglang/zig")), "zig", root)
        cc_version = checked([str(zig), "version"], "zig version").strip()
        if cc_version != plan.host_cc.pins[0].version:
            raise ToolchainError(
                f"zig at {zig} reports {cc_version}, pinned {plan.host_cc.pins[0].version}",
                hint="the toolchain cache is damaged: delete it and provision again",
            )
        cc = (str(zig), "cc", "-target", zig_target(plan.target_arch))

    root = plan.install_dir(plan.inspector)
    cuobjdump = _one(list(root.glob("nvidia/*/bin/cuobjdump")), "cuobjdump", root)
    inspector_version = parse_release_version(
        checked([str(cuobjdump), "--version"], "cuobjdump --version")
    )
    return Toolchain(
        plan=plan,
        device_version=device_version,
        cuda_home=cuda_home,
        nvrtc_lib=nvrtc_lib,
        nvfatbin_lib=nvfatbin_lib,
        include_dirs=include_dirs,
        cc=tuple(cc),
        cc_version=cc_version,
        cuobjdump=cuobjdump,
        inspector_version=inspector_version,
        installed=installed,
    )


def host_machine() -> str:
    """This host's CPU arch in the matrix's spelling."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def present_dirs(plans: Sequence[ToolchainPlan]) -> frozenset[Path]:
    """The cache dirs of these plans that hold a complete install (for `doctor_rows`)."""
    return frozenset(
        plan.install_dir(p)
        for plan in plans
        for p in plan.pinsets
        if (plan.install_dir(p) / ".complete").is_file()
    )
