"""What a wheel built in a torch environment goes through besides the checks every wheel
gets: any device code at all (a quietly CPU-only build stops here, explained, unless the
cell declares device-code: none), the ABI check against the pinned torch, and the torch
requirement its METADATA must state (after which the manylinux verdict leaves out the
libraries that torch and the wheel's other requirements bring: release.building.runtimedeps).
`TorchBuildEnv` is a provisioned torch venv as the build stage holds it
(release.building.settings.BuildEnv): the pipeline asks it to `certify` a wheel, and
`build_environment` is how the stage provisions one.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from packaging.tags import Tag
from packaging.version import Version

from release.backends import EnvironmentSpec
from release.building.settings import CellFailure
from release.building.torchpin import pinned, stable_target_version, torch_requirement
from release.credentials import without_credentials
from release.inspection.devicecode import JIT_FIRST, holds_device_code
from release.inspection.limitedapi import limited_api_auditor
from release.inspection.torchabi import abi_problems, torch_exports
from release.inspection.torchaudit import TOOL, torch_abi_auditor
from release.matrix import Cell
from release.toolchain.buildenv import provision_environment
from release.toolchain.provision import Progress
from release.toolchain.torchenv import TorchEnv
from release.wheelfile import NotAWheel, WheelName

CPU_ONLY = (
    "the wheel holds no device code: its shared objects have no cubin and no PTX, so the "
    "build compiled no CUDA kernel (nvcc never ran). Either the build skipped CUDA (a "
    "setup.py that builds its CUDAExtension only when torch.cuda.is_available() builds "
    "CPU-only on a machine without a GPU, which a release builder is): set the project's "
    'force-CUDA switch in the matrix\'s build.env (FORCE_CUDA: "1" in most projects); or '
    f"{JIT_FIRST}"
)


def tags_problem(filename: str, cell: Cell) -> str | None:
    """The build's interpreter and ABI tags against the cell's, with the remedy; a filename
    that is not a wheel's says so."""
    try:
        tag = min(WheelName.parse(filename).tags, key=str)
    except NotAWheel as why:
        return f"{filename}: {why}"
    built = f"{tag.interpreter}-{tag.abi}"
    wanted = f"{cell.python_tag}-{cell.abi_tag}"
    if built == wanted:
        return None
    return f"the build made a {built} wheel, the cell is {wanted} ({_tag_remedy(tag, cell)})"


def _tag_remedy(tag: Tag, cell: Cell) -> str:
    """How the matrix or the project agrees with the tags the build made."""
    if tag.abi == "abi3":
        floor = tag.interpreter.removeprefix("cp")
        return f'a py_limited_api build: set abi3: "{floor[0]}.{floor[1:]}" for it'
    if tag.abi == "none":
        return "a build that uses no Python C-API: set python: any for it"
    if cell.torch is not None and cell.abi_tag == "none":
        return (
            "python: any expects one py3-none wheel of an extension that uses no Python "
            "C-API: make the project tag its wheel py3-none (its bdist_wheel's get_tag), or "
            "list the Pythons to build it for under python:"
        )
    return "not an abi3 build: list the Pythons to build it for under python:"


def certify_torch(
    wheel: Path,
    cell: Cell,
    torch_env: TorchEnv,
    *,
    log: Path,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The torch checks of a freshly built wheel, then its METADATA pinned to the torch it
    was built against (rewritten in place). Raises CellFailure. Which SMs the device code
    covers is the inspection's, after this; here only whether there is any. A stable-ABI
    build (TORCH_TARGET_VERSION on its compile lines) is also held to the stable API by
    torch-abi-audit (release.inspection.torchaudit). Where either fails for an abi3 cell,
    its limited API (the inspection's abi3audit, run by `python`) is audited too, so that
    the message names both."""
    data = wheel.read_bytes()
    # a cell of device-code: none has none by design: the inspection proves it holds none
    if not cell.host_only and not holds_device_code(data):
        raise CellFailure(CPU_ONLY)
    try:
        target = stable_target_version(log.read_text(encoding="utf-8", errors="replace"))
    except ValueError as error:
        raise CellFailure(str(error)) from None
    clean = without_credentials(env or {})
    # torch-abi-audit holds a stable-ABI build to the stable API; where it is not installed
    # (Python 3.10) torchabi's own check of torch's C++ symbols stands in
    audited = torch_abi_auditor(python, clean)(data, target) if target is not None else None
    problems = abi_problems(
        data,
        torch_exports(torch_env.lib_dirs),
        stable=target is not None and audited is None,
        torch_label=torch_env.torch_version,
    )
    if problems or audited:
        failures = [f"ABI check: {'; '.join(problems)}"] if problems else []
        failures += [f"{TOOL}: {'; '.join(audited)}"] if audited else []
        if cell.abi3 is not None:
            limited = limited_api_auditor(python, cell.abi3, clean)(wheel.name, data)
            if limited:
                failures.append("abi3audit: " + "; ".join(limited))
        raise CellFailure("; ".join(failures))
    requirement = torch_requirement(Version(torch_env.torch_version), target)
    try:
        built_with = Version(Version(torch_env.torch_version).public)
        wheel.write_bytes(pinned(wheel.name, data, requirement, built_with=built_with))
    except ValueError as error:
        raise CellFailure(str(error)) from None
    return wheel


@dataclass(frozen=True)
class TorchBuildEnv(TorchEnv):
    """A provisioned torch venv as the build stage holds it: what TorchEnv says of it, and
    the torch checks of a wheel built in it."""

    def certify(
        self, wheel: Path, cell: Cell, *, log: Path, python: str, env: Mapping[str, str]
    ) -> Path:
        return certify_torch(wheel, cell, self, log=log, python=python, env=env)


def build_environment(
    spec: EnvironmentSpec,
    *,
    toolkit: Path,
    cache_dir: Path,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None,
) -> TorchBuildEnv:
    """The build environment `spec` asks for, provisioned in `cache_dir` (one kind today: a
    torch venv)."""
    made = provision_environment(
        spec, toolkit=toolkit, cache_dir=cache_dir, python=python, env=env, progress=progress
    )
    return TorchBuildEnv(**{field.name: getattr(made, field.name) for field in fields(made)})
