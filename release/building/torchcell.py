"""What a wheel built in a torch environment goes through besides the checks every wheel
gets: any device code at all (a quietly CPU-only build stops here, explained, unless the
cell declares device-code: none), the ABI check against the pinned torch, and the torch
requirement its METADATA must state (for a stable-ABI wheel: from the oldest torch it admits
on its cell's CUDA major, read from the cell's torch index, and admitting no torch of another
CUDA major; after which the manylinux verdict leaves out the libraries that torch and the
wheel's other requirements bring: release.building.runtimedeps).
`TorchBuildEnv` is a provisioned torch venv as the build stage holds it
(release.building.settings.BuildEnv): the pipeline asks it to `certify` a wheel, and
`build_environment` is how the stage provisions one.
"""

from __future__ import annotations

import io
import re
import sys
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from release import pep508
from release.backends import DRIVER_LIBRARY, DRIVER_STUB, EnvironmentSpec
from release.backends.torch_extension import TorchEnvSpec
from release.building.settings import CellFailure
from release.building.torchpin import pinned, stable_target_version, torch_requirement
from release.credentials import without_credentials
from release.errors import ToolchainError
from release.inspection.cudalibs import torch_problems
from release.inspection.devicecode import JIT_FIRST, holds_device_code
from release.inspection.elffacts import wheel_elfs
from release.inspection.limitedapi import limited_api_auditor
from release.inspection.runtimelibs import (
    installed_distributions,
    library_dirs,
    marker_environment,
    wheel_requirements,
)
from release.inspection.stabletorch import NoTorchForCuda, build_torch_problem, oldest_admitted
from release.inspection.torchabi import abi_problems, runtime_exports, torch_exports
from release.inspection.torchaudit import TOOL, torch_abi_auditor
from release.inspection.torchcuda import IndexTorches, TorchIndexes
from release.matrix import Cell
from release.toolchain.buildenv import cell_targets, provision_environment
from release.toolchain.cudahome import DRIVER_SONAME
from release.toolchain.provision import Progress
from release.toolchain.torchenv import REQUIREMENTS_HINT, TorchEnv, provisioned
from release.wheelfile import NotAWheel, WheelName, wheel_facts

CPU_ONLY = (
    "the wheel holds no device code: its shared objects have no cubin and no PTX, so the "
    "build compiled no CUDA kernel (nvcc never ran). Either the build skipped CUDA (a "
    "setup.py that builds its CUDAExtension only when torch.cuda.is_available() builds "
    "CPU-only on a machine without a GPU, which a release builder is): set the project's "
    'force-CUDA switch in the matrix\'s build.env (FORCE_CUDA: "1" in most projects); or '
    f"{JIT_FIRST}"
)


# the generic Python tags a project's bdist_wheel may give a wheel of no Python ABI
PY3_NONE = re.compile(r"py3\d*-none")


def tags_problem(filename: str, cell: Cell) -> str | None:
    """The build's interpreter and ABI tags against the cell's, with the remedy; a filename
    that is not a wheel's says so."""
    try:
        tag = min(WheelName.parse(filename).tags, key=str)
    except NotAWheel as why:
        return f"{filename}: {why}"
    built = f"{tag.interpreter}-{tag.abi}"
    wanted = f"{cell.python_tag}-{cell.abi_tag}"
    if built == wanted or (wanted == "py3-none" and PY3_NONE.fullmatch(built)):
        return None  # a project's py39-none (xformers') is the cell's py3-none, retagged
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


IndexReader = Callable[[Cell, Version], IndexTorches]


def index_torches(cell: Cell, target: Version, indexes: TorchIndexes | None = None) -> IndexTorches:
    """The torch releases from `target` on that the cell's torch index has for its arch and
    Python, each with the CUDA it is built for (release.inspection.torchcuda), read through
    the run's `indexes` (each index once a run; None: a reader of its own)."""
    python = cell_targets(cell).python
    index = (indexes or TorchIndexes()).of(cell.torch_index)
    return index.releases(cell.arch, SpecifierSet(f">={target}"), python=python)


def run_reader(indexes: TorchIndexes) -> IndexReader:
    """`index_torches` through the run's `indexes`."""
    return lambda cell, target: index_torches(cell, target, indexes)


def other_cuda_problems(data: bytes, cell: Cell, torches: IndexTorches) -> list[str]:
    """The inspection's `torch` rule (release.inspection.cudalibs) on a stable-ABI wheel's
    bytes, its torch requirement's releases read from the cell's index (`torches`): one
    that admits a torch built for another CUDA major than the wheel links, named."""
    facts = wheel_facts(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        elfs = list(wheel_elfs(archive))
    found, _ = torch_problems(
        elfs, facts.requires_dist, label=cell.local_label, arch=cell.arch,
        torch_cuda=torches.cuda_of,
    )  # fmt: skip
    return [detail for _, detail in found]


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
    beside = dependency_library_dirs(data, cell, torch_env)
    if DRIVER_LIBRARY in cell.build.cuda_libraries:  # the driver API, as its stub has it
        beside[f"the NVIDIA driver ({DRIVER_SONAME})"] = (torch_env.cuda_home / DRIVER_STUB.parent,)
    problems = abi_problems(
        data,
        torch_exports((*torch_env.lib_dirs, *(d for dirs in beside.values() for d in dirs)))
        | runtime_exports(),
        stable=target is not None and audited is None,
        torch_label=torch_env.torch_version,
        beside=list(beside),
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
    elsewhere = other_cuda_problems(data, cell, torches) if torches is not None else []
    if elsewhere:
        raise CellFailure("; ".join(elsewhere))
    wheel.write_bytes(data)
    return wheel


def dependency_library_dirs(
    wheel_data: bytes, cell: Cell, torch_env: TorchEnv
) -> dict[str, tuple[Path, ...]]:
    """Where the libraries of the wheel's runtime dependencies lie in the torch environment
    (its build installed them there: build.requires), by distribution: the wheel loads
    beside them as beside torch (libtvm_ffi.so of apache-tvm-ffi). torch's own libraries
    and those of its CUDA wheels (torch_env.lib_dirs) are not among them."""
    if torch_env.site_packages is None:
        return {}
    markers = marker_environment(cell_targets(cell).python or "", cell.arch)
    installed = installed_distributions(torch_env.site_packages)
    torch_dirs = {d.resolve() for d in torch_env.lib_dirs}
    return {
        name: dirs
        for name, dirs in library_dirs(wheel_requirements(wheel_data), installed, markers).items()
        if not {d.resolve() for d in dirs} <= torch_dirs
    }


@dataclass(frozen=True, kw_only=True)
class TorchBuildEnv(TorchEnv):
    """A provisioned torch venv as the build stage holds it: what TorchEnv says of it, and
    the torch checks of a wheel built in it (a stable-ABI wheel's torch index read through
    the run's `torch_indexes`)."""

    torch_indexes: TorchIndexes = field(default_factory=TorchIndexes, compare=False, repr=False)

    def certify(
        self, wheel: Path, cell: Cell, *, log: Path, python: str, env: Mapping[str, str]
    ) -> Path:
        read_index = run_reader(self.torch_indexes)
        return certify_torch(
            wheel, cell, self, log=log, python=python, env=env, read_index=read_index
        )


def build_environment(
    spec: EnvironmentSpec,
    *,
    toolkit: Path,
    cache_dir: Path,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None,
    torch_indexes: TorchIndexes | None = None,
) -> TorchBuildEnv:
    """The build environment `spec` asks for, provisioned in `cache_dir` (one kind today: a
    torch venv); a stable-ABI wheel built in it reads its torch index through the run's
    `torch_indexes`. Before a torch is downloaded, its own requirements are read from its
    index and held to the build's (`requirements_problem`)."""
    torch_indexes = torch_indexes or TorchIndexes()
    if isinstance(spec, TorchEnvSpec) and not provisioned(spec, cache_dir):
        problem = requirements_problem(spec, torch_indexes)
        if problem is not None:
            raise ToolchainError(problem, hint=REQUIREMENTS_HINT)
    made = provision_environment(
        spec, toolkit=toolkit, cache_dir=cache_dir, python=python, env=env, progress=progress
    )
    return TorchBuildEnv(
        **{f.name: getattr(made, f.name) for f in fields(made)}, torch_indexes=torch_indexes
    )


def requirements_problem(spec: TorchEnvSpec, torch_indexes: TorchIndexes) -> str | None:
    """Why pip would refuse the spec's torch beside its other build requirements, from that
    torch's METADATA on its index (its PEP 658 file: kilobytes, where pip would download the
    whole torch and its CUDA wheels, gigabytes, before it found out); None where nothing
    excludes it, or where the METADATA cannot be read (pip's install then says)."""
    try:
        requires = torch_indexes.of(spec.index_url).requirements(spec.torch, spec.arch, spec.python)
    except ToolchainError:
        return None
    # one whose marker leaves it out of this environment is no requirement pip installs
    env = pep508.linux_environment(spec.arch, spec.python)
    build = [
        (r, "a build requirement")
        for r in pep508.readable(spec.requirements)
        if pep508.applies(r, env)
    ]
    found = pep508.exclusion(requires, build)
    if found is None:
        return None
    theirs, ours, _ = found
    return (
        f"torch {spec.torch} requires {theirs.name}{theirs.specifier}, which the build "
        f"requirement {ours} (the project's [build-system] requires, or build.requires) "
        "excludes: pip cannot install both"
    )
