"""What a wheel built in a torch environment goes through besides the checks every wheel
gets (the manylinux verdict leaves torch's own libraries out for it, as for every torch
cell): any device code at all (a quietly CPU-only build stops here, explained), the ABI
check against the pinned torch, and the torch requirement its METADATA must state (for a
stable-ABI wheel: from the oldest torch it admits on its cell's CUDA major, read from the
cell's torch index, and admitting no torch of another CUDA major).
`TorchBuildEnv` is a provisioned torch venv as the build stage holds it
(release.building.settings.BuildEnv): the pipeline asks it to `certify` a wheel, and
`build_environment` is how the stage provisions one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.backends import EnvironmentSpec
from release.building.settings import CellFailure
from release.building.torchpin import pinned, stable_target_version, torch_requirement
from release.credentials import without_credentials
from release.errors import ToolchainError
from release.inspection.devicecode import holds_device_code
from release.inspection.limitedapi import limited_api_auditor
from release.inspection.torchabi import abi_problems, torch_exports
from release.inspection.torchaudit import TOOL, torch_abi_auditor
from release.inspection.torchcuda import other_cuda_problems
from release.matrix import Cell
from release.toolchain.buildenv import cell_targets, provision_environment
from release.toolchain.provision import Progress
from release.toolchain.torchbuilds import (
    IndexTorches,
    NoTorchForCuda,
    build_torch_problem,
    oldest_admitted,
    read_index_torches,
)
from release.toolchain.torchenv import TorchEnv
from release.wheelfile import NotAWheel, wheel_name

CPU_ONLY = (
    "the wheel holds no device code: its shared objects have no cubin and no PTX, so the "
    "build compiled no CUDA kernel (nvcc never ran). A setup.py that builds its "
    "CUDAExtension only when torch.cuda.is_available() builds CPU-only on a machine "
    "without a GPU, which a release builder is: set the project's force-CUDA switch in "
    'the matrix\'s build.env (FORCE_CUDA: "1" in most projects)'
)


def tags_problem(filename: str, cell: Cell) -> str | None:
    """The build's interpreter and ABI tags against the cell's, with the remedy; a filename
    that is not a wheel's says so."""
    try:
        tag = min(wheel_name(filename).tags, key=str)
    except NotAWheel as why:
        return f"{filename}: {why}"
    built = f"{tag.interpreter}-{tag.abi}"
    wanted = f"{cell.python_tag}-{cell.abi_tag}"
    if built == wanted:
        return None
    if tag.abi == "abi3":
        floor = tag.interpreter.removeprefix("cp")
        remedy = f'a py_limited_api build: set abi3: "{floor[0]}.{floor[1:]}" for it'
    else:
        remedy = "not an abi3 build: list the Pythons to build it for under python:"
    return f"the build made a {built} wheel, the cell is {wanted} ({remedy})"


IndexReader = Callable[[Cell, Version], IndexTorches]


def index_torches(cell: Cell, target: Version) -> IndexTorches:
    """The torch releases from `target` on that the cell's torch index has for its arch and
    Python, each with the CUDA it is built for (release.toolchain.torchbuilds)."""
    python = cell_targets(cell).python
    return read_index_torches(cell.torch_index, cell.arch, SpecifierSet(f">={target}"),
                              python=python)  # fmt: skip


def stable_pin(
    cell: Cell, built_with: Version, target: Version, torches: IndexTorches
) -> Requirement:
    """What a stable-ABI wheel of `cell` built against `built_with` requires: `torch>=` the
    oldest torch it admits on the cell's CUDA major (TORCH_TARGET_VERSION raised to the
    first torch the index has for that major). Raises CellFailure where the build's torch
    is not that one and matrix.yaml does not say a newer one is on purpose, or the index
    has no torch for the cell's CUDA."""
    try:
        oldest = oldest_admitted(torches, target, cell.cuda.major)
    except NoTorchForCuda as error:
        raise CellFailure(f"the wheel's torch requirement cannot be decided: {error}") from None
    problem = build_torch_problem(oldest, built_with, cell.newer_torch)
    if problem is not None:
        raise CellFailure(problem)
    return torch_requirement(built_with, oldest.version)


def certify_torch(
    wheel: Path,
    cell: Cell,
    torch_env: TorchEnv,
    *,
    log: Path,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    read_index: IndexReader = index_torches,
) -> Path:
    """The torch checks of a freshly built wheel, then its METADATA pinned to the torch it
    was built against (rewritten in place). Raises CellFailure. Which SMs the device code
    covers is the inspection's, after this; here only whether there is any. A stable-ABI
    build (TORCH_TARGET_VERSION on its compile lines) is also held to the stable API by
    torch-abi-audit (release.inspection.torchaudit). Where either fails for an abi3 cell,
    its limited API (the inspection's abi3audit, run by `python`) is audited too, so that
    the message names both. A stable-ABI wheel's requirement starts at the oldest torch it
    admits on the cell's CUDA major (`stable_pin`, from the releases `read_index` gives),
    and no torch it admits may be built for another CUDA major."""
    data = wheel.read_bytes()
    if not holds_device_code(data):
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
    built_with = Version(Version(torch_env.torch_version).public)
    torches = None
    requirement = torch_requirement(built_with, None)
    if target is not None:
        try:
            torches = read_index(cell, target)
        except ToolchainError as error:
            raise CellFailure(error.message) from None
        requirement = stable_pin(cell, built_with, target, torches)
    try:
        data = pinned(wheel.name, data, requirement, built_with=built_with)
    except ValueError as error:
        raise CellFailure(str(error)) from None
    elsewhere = other_cuda_problems(data, torches, cell.cuda) if torches is not None else []
    if elsewhere:
        raise CellFailure("; ".join(elsewhere))
    wheel.write_bytes(data)
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
