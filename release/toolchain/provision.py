"""Provisioning, the edge: `provision` installs a plan's pinned wheels into the cache once
(pip --target into a temp dir, then a rename), probes every tool's real version, through a
`proc.Runner`, and assembles the CUDA_HOME of the plan's CUDA libraries
(release.toolchain.cudahome); a pip too old for it stops before any download.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from release import proc
from release.errors import ToolchainError
from release.fsutil import remove_unfollowed
from release.resources import script
from release.toolchain import cudahome
from release.toolchain.pins import PIP_FLOOR, RUNTIME_LIBRARY, PinSet
from release.toolchain.plan import (
    Toolchain,
    ToolchainPlan,
    check_cuda_version,
    parse_release_version,
    zig_target,
)


def _checked(runner: proc.Runner, cmd: Sequence[str], what: str, env: Mapping[str, str]) -> str:
    result = runner(cmd, env=env, separate_stderr=True)
    if result.returncode != 0:
        raise ToolchainError(proc.failure(what, result))
    return result.output


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
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
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


def pip_progress(label: str, progress: Progress | None) -> Callable[[str], None]:
    """A pip output reader that turns `--progress-bar raw` lines into `progress` calls."""
    downloads: dict[str, tuple[int, int]] = {}
    current = [label]

    def on_line(line: str) -> None:
        if line.strip().startswith("Downloading "):
            wheel = line.split()[1].rsplit("/", 1)[-1]
            current[0] = " ".join(wheel.split("-")[:2])  # "ziglang 0.17.1"
        match = _PIP_PROGRESS.match(line.strip())
        if match and progress is not None:
            downloads[current[0]] = (int(match[1]), int(match[2]))
            done = sum(d for d, _ in downloads.values())
            total = sum(t for _, t in downloads.values())
            progress(f"{label}: {current[0]}", done, total)

    return on_line


# The lines of a pip failure that say why: the resolver's conflict with a constraint or
# with a dependency of what it installs (`torch 2.13.0 depends on setuptools>=77.0.3`), a
# version the index does not have.
_PIP_REASON = re.compile(
    r"^\s*(?:The user requested \(constraint\) \S.*|\S+ \S+ depends on \S.*|"
    r"ERROR: (?:Could not find a version that satisfies the requirement \S.*|"
    r"No matching distribution found for \S.*|Cannot install \S+))"
)
_DEPENDS_ON = " depends on "
_MAX_REASON = 400


def pip_reason(text: str) -> str | None:
    """What pip said about the refused requirement (`Cannot install torch==2.15.0; The user
    requested (constraint) torch<=2.14.1`), in one line, or None where it said nothing so."""
    found = []
    for line in text.splitlines():
        if _PIP_REASON.match(line):
            said = line.strip().removeprefix("ERROR: ")
            found.append(said.split(" because ")[0] if said.startswith("Cannot install") else said)
    joined = "; ".join(dict.fromkeys(found))
    return joined[:_MAX_REASON] if joined else None


def pip_config_sources(debug_output: str) -> str | None:
    """Where pip's own settings come from, from `pip config debug`: the PIP_* variables and
    each existing configuration file with the keys it sets, names only (an index URL can
    hold a password); None where there are none."""
    variables: list[str] = []
    files: list[tuple[str, list[str]]] = []
    section = ""
    keys: list[str] | None = None
    for line in debug_output.splitlines():
        stripped = line.strip()
        if line and not line.startswith(" "):
            section, keys = line.rstrip(":"), None
        elif section == "env_var" and "=" in stripped:
            variables.append(stripped.split("=", 1)[0])
        elif stripped.endswith(", exists: True"):
            keys = []
            files.append((stripped.removesuffix(", exists: True"), keys))
        elif stripped.endswith(", exists: False"):
            keys = None
        elif line.startswith("    ") and keys is not None and ":" in stripped:
            keys.append(stripped.split(":", 1)[0])
    named = [f"{path} ({', '.join(found)})" for path, found in files if found]
    if variables:
        named.insert(0, f"the environment ({', '.join(variables)})")
    return "; ".join(dict.fromkeys(named)) or None


def check_pip_install(
    result: proc.Completed,
    requirements: Sequence[str],
    *,
    python: str,
    hint: str = "",
    conflict_hints: Mapping[str, str] | None = None,
    config: Callable[[], str | None] = lambda: None,
) -> None:
    """A failed pip install as a ToolchainError: a pip that rejects release's options is
    told to upgrade; a dependency of what it installs that excludes another of the
    requirements is said with both, and the hint `conflict_hints` gives the package that
    depends (by canonical name); another refusal pip explains is said with its reason and
    where pip's own configuration comes from (`config`, asked only then); anything else, to
    check the index."""
    if result.returncode == 0:
        return
    what = f"pip installing {', '.join(requirements)}"
    text = result.stderr + result.output
    if proc.rejected_arguments(text) is not None:
        raise ToolchainError(
            proc.failure(what, result),
            hint=f"this pip does not take an option that release passes: "
            f"{python} -m pip install --upgrade 'pip>={PIP_FLOOR}'",
        )
    reason = pip_reason(text)
    if reason is None:
        raise ToolchainError(
            proc.failure(what, result),
            hint=hint or "check that PyPI is reachable and has wheels for this platform",
        )
    if _DEPENDS_ON in reason and "(constraint)" not in reason:
        depends = next(part for part in reason.split("; ") if _DEPENDS_ON in part)
        name = canonicalize_name(depends.split(" ", 1)[0])
        raise ToolchainError(
            f"{what} failed (exit {result.returncode}): {reason}",
            hint=(conflict_hints or {}).get(name)
            or "a dependency of one requirement excludes another: change either version",
        )
    sources = config()
    raise ToolchainError(
        f"{what} failed (exit {result.returncode}): {reason}",
        hint=(
            f"pip's own configuration applies to release's installs: {sources}; a constraint "
            "or index there can refuse the pin: change it, or provision with "
            "PIP_CONFIG_FILE=/dev/null"
            if sources
            else hint or "check that the index has that version for this platform"
        ),
    )


def pip_config(
    runner: proc.Runner, python: str, env: Mapping[str, str]
) -> Callable[[], str | None]:
    """`pip_config_sources` of `python`'s pip, asked when called."""

    def ask() -> str | None:
        debug = runner([python, "-m", "pip", "config", "debug"], env=env, separate_stderr=True)
        return pip_config_sources(debug.output) if debug.ok else None

    return ask


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
    # never one a provision is writing (each installs aside and renames it whole, its marker
    # in it): a copy without it, or what an interrupted cleanup left
    remove_unfollowed(dest)
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
        result = runner(
            cmd, env=env, separate_stderr=True, on_line=pip_progress(pinset.label, progress)
        )
        check_pip_install(
            result, pinset.requirements, python=python, config=pip_config(runner, python, env)
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


_INCOMPLETE = (
    "the toolchain cache is incomplete or damaged: delete that toolchain's directory under "
    "toolchains/ and provision again"
)
# what nvcc runs beside itself; one missing there is looked for on PATH, which may hold another
NVCC_PROGRAMS = ("bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/cudafe++", "nvvm/bin/cicc")


def _one(paths: list[Path], what: str, where: Path) -> Path:
    if not paths:
        raise ToolchainError(f"{what} not found in {where}", hint=_INCOMPLETE)
    return sorted(paths)[0]


def _version_of(program: Path, what: str, checked: Checked, *, hint: str) -> str:
    """The CUDA version `program --version` reports; an error naming the program where it
    reports none."""
    try:
        return parse_release_version(checked([str(program), "--version"], what))
    except ToolchainError as error:
        raise ToolchainError(f"{program} --version: {error.message}", hint=hint) from None


Checked = Callable[[Sequence[str], str], str]
"""Runs a probe (the command, what it is) and returns its output; a failure is an error."""


@dataclass(frozen=True, kw_only=True)
class _DeviceCompiler:
    """What provisioning found of the device compiler: nvcc's toolkit, or NVRTC's libraries."""

    version: str
    cuda_home: Path | None = None
    nvrtc_lib: Path | None = None
    nvfatbin_lib: Path | None = None
    include_dirs: tuple[Path, ...] = ()


def _install(
    plan: ToolchainPlan,
    runner: proc.Runner,
    *,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None,
) -> tuple[str, ...]:
    """Install every pin set of the plan not yet in the cache (pip checked first, when one
    is missing); the names of those this call installed."""
    if any(not (plan.install_dir(p) / ".complete").is_file() for p in plan.pinsets):
        check_pip(runner, python=python, env=env)
    return tuple(
        plan.install_dir(p).name
        for p in plan.pinsets
        if install_pinset(p, plan.install_dir(p), runner, python=python, env=env, progress=progress)
    )


def _system_nvcc(plan: ToolchainPlan, checked: Checked) -> _DeviceCompiler:
    cuda_home = plan.cuda_home or Path("/usr/local/cuda")
    nvcc = cuda_home / "bin" / "nvcc"
    if not nvcc.is_file():
        raise ToolchainError(
            f"{nvcc} does not exist",
            hint="--cuda-home / CUDA_HOME must be a CUDA toolkit root (with bin/nvcc)",
        )
    version = _version_of(nvcc, "nvcc", checked, hint="--cuda-home / CUDA_HOME: a CUDA toolkit")
    check_cuda_version(plan, "nvcc", nvcc, version)
    return _DeviceCompiler(version=version, cuda_home=cuda_home)


def _pypi_nvcc(plan: ToolchainPlan, device: PinSet, checked: Checked) -> _DeviceCompiler:
    root = plan.install_dir(device)
    nvcc = _one(list(root.glob("nvidia/*/bin/nvcc")), "nvcc", root)
    for program in NVCC_PROGRAMS:
        if not (nvcc.parent.parent / program).is_file():
            raise ToolchainError(f"{nvcc.parent.parent / program} not found", hint=_INCOMPLETE)
    version = _version_of(nvcc, "nvcc", checked, hint=_INCOMPLETE)
    check_cuda_version(plan, "nvcc", nvcc, version)
    return _DeviceCompiler(version=version, cuda_home=nvcc.parent.parent)


def _nvrtc(
    plan: ToolchainPlan, device: PinSet, checked: Checked, *, python: str
) -> _DeviceCompiler:
    root = plan.install_dir(device)
    nvrtc_lib = _one(list(root.glob("nvidia/*/lib/libnvrtc.so.*[0-9]")), "libnvrtc", root)
    nvfatbin_lib = _one(list(root.glob("nvidia/*/lib/libnvfatbin.so.*")), "libnvfatbin", root)
    header = _one(list(root.glob("nvidia/*/include/cuda_fp16.h")), "cuda_fp16.h", root)
    probe = checked(
        [python, str(script("nvrtc_version.py")), str(nvrtc_lib), str(nvfatbin_lib)],
        "NVRTC/nvFatbin version probe",
    ).split()
    check_cuda_version(plan, "NVRTC", nvrtc_lib, probe[0])
    check_cuda_version(plan, "nvFatbin", nvfatbin_lib, probe[1])
    return _DeviceCompiler(
        version=_installed_version(root, "nvidia-cuda-nvrtc") or probe[0],
        nvrtc_lib=nvrtc_lib,
        nvfatbin_lib=nvfatbin_lib,
        include_dirs=(header.parent,),
    )


def _device_compiler(plan: ToolchainPlan, checked: Checked, *, python: str) -> _DeviceCompiler:
    """The device compiler: a system toolkit's nvcc, or nvcc or NVRTC from the plan's pins."""
    if plan.device is None:
        return _system_nvcc(plan, checked)
    if plan.device_compiler == "nvcc":
        return _pypi_nvcc(plan, plan.device, checked)
    return _nvrtc(plan, plan.device, checked, python=python)


def _host_cc(plan: ToolchainPlan, checked: Checked) -> tuple[tuple[str, ...], str]:
    """The host C compiler command and its version: the system's, or the pinned zig's."""
    if plan.host_cc is None:
        cc = plan.system_cc or ("cc",)
        first = checked([*cc, "--version"], f"{cc[0]} --version").splitlines()
        return tuple(cc), first[0].strip() if first else "unknown"
    root = plan.install_dir(plan.host_cc)
    zig = _one(list(root.glob("ziglang/zig")), "zig", root)
    cc_version = checked([str(zig), "version"], "zig version").strip()
    if cc_version != plan.host_cc.pins[0].version:
        raise ToolchainError(
            f"zig at {zig} reports {cc_version}, pinned {plan.host_cc.pins[0].version}",
            hint="the toolchain cache is damaged: delete it and provision again",
        )
    return (str(zig), "cc", "-target", zig_target(plan.target_arch)), cc_version


def _inspector(plan: ToolchainPlan, checked: Checked) -> tuple[Path, str]:
    """cuobjdump from the plan's pins, and its CUDA version."""
    root = plan.install_dir(plan.inspector)
    cuobjdump = _one(list(root.glob("nvidia/*/bin/cuobjdump")), "cuobjdump", root)
    version = _version_of(cuobjdump, "cuobjdump --version", checked, hint=_INCOMPLETE)
    return cuobjdump, version


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

    installed = _install(plan, runner, python=python, env=environ, progress=progress)
    device = _device_compiler(plan, checked, python=python)
    cc, cc_version = _host_cc(plan, checked)
    cuobjdump, inspector_version = _inspector(plan, checked)
    build_home = None
    if plan.libraries is not None:
        build_home = cudahome.assemble(
            plan.cache_dir,
            cuda=plan.cuda,
            toolkit=device.cuda_home if plan.device_compiler == "nvcc" else None,
            libraries=plan.install_dir(plan.libraries),
            names=(RUNTIME_LIBRARY, *plan.library_names),
            compile_stub=lambda arguments: checked([*cc, *arguments], "compiling libcuda's stub"),
            compiler=shlex.join(cc),
        )
    return Toolchain(
        plan=plan,
        device_version=device.version,
        cuda_home=device.cuda_home,
        nvrtc_lib=device.nvrtc_lib,
        nvfatbin_lib=device.nvfatbin_lib,
        include_dirs=device.include_dirs,
        cc=cc,
        cc_version=cc_version,
        cuobjdump=cuobjdump,
        inspector_version=inspector_version,
        installed=installed,
        build_home=build_home,
    )
