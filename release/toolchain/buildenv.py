"""What a cell's backend is told of it (`cell_targets`), the plan of its toolchain
(`cell_plan`: with the CUDA libraries its CUDA_HOME gets), the build environment of its own
that a backend asks for (`environment_of`: a torch cell's pinned torch in a venv), and that
environment provisioned into the toolchain cache (`provision_environment`). The build stage,
the dry run, doctor, the GPU gate and the project's naming go through here, so that none of
them asks what kind of cell it has.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from release import pep508
from release.backends import (
    CellTargets,
    EnvironmentSpec,
    backend_for,
    pyproject_table,
    read_build_backend,
)
from release.fsutil import read_document
from release.matrix import Cell
from release.toolchain.plan import Toolchain, ToolchainPlan, resolve
from release.toolchain.torchenv import provision_torch_env, venv_python

# how a build environment is made (one kind today: a torch venv); the build stage's view of
# one, with its checks, is release.building.settings.BuildEnv
provision_environment = provision_torch_env


def frontend_requirement(build_requires: Sequence[str] = ()) -> str:
    """The PEP 517 frontend a build environment gets: this tool's own `build`, at its
    version; or, where one of `build_requires` (installed beside it) excludes what that
    version requires (SageAttention's packaging<24 beside build 1.6.1's packaging>=24.0),
    `build` at whichever version pip finds room for. The frontend only calls the backend's
    hooks: the wheel's bytes are the backend's."""
    own = f"build=={metadata.version('build')}"
    linux = pep508.linux_environment(arch=None, python=None)
    needs = [
        r for r in map(pep508.requirement, metadata.requires("build") or ())
        if pep508.applies(r, linux)
    ]  # fmt: skip
    # one that does not parse is pip's to report, in the project's own words
    beside = [(r, str(r)) for r in pep508.readable(build_requires)]
    return own if pep508.exclusion(needs, beside) is None else "build"


def build_requirements(pyproject: str | bytes) -> tuple[str, ...]:
    """The project's [build-system] requires other than torch (which a torch cell pins);
    ConfigError where pyproject.toml is no TOML."""
    system = pyproject_table(pyproject).get("build-system", {})
    requires = system.get("requires", ["setuptools"]) if isinstance(system, dict) else []
    kept = []
    for text in requires if isinstance(requires, list) else []:
        try:
            name = canonicalize_name(Requirement(str(text)).name)
        except InvalidRequirement:
            kept.append(str(text))  # pip reports it, naming the project's own words
            continue
        if name != "torch":
            kept.append(str(text))
    return tuple(kept)


def cell_targets(cell: Cell) -> CellTargets:
    """What the cell's backend is told of it, with what its project's pyproject.toml says
    (the PEP 517 backend, the other build requirements: the one file this reads)."""
    pyproject = cell.project.path / "pyproject.toml"
    text = read_document(pyproject) if pyproject.is_file() else b""
    return CellTargets(
        cuda=str(cell.cuda),
        arch=cell.arch,
        sms=tuple(cell.sms),
        ptx=cell.ptx,
        local_label=cell.local_label,
        recipe=cell.build,
        build_backend=read_build_backend(text),
        compress_mode=cell.compress_mode,
        torch=str(cell.torch) if cell.torch is not None else None,
        torch_index=cell.torch_index,
        # the CPython the cell builds with: its own, else (abi3) this one
        python=cell.python or f"{sys.version_info.major}.{sys.version_info.minor}",
        # the project's own, then the matrix's build.requires
        build_requires=(requires := (*build_requirements(text), *cell.build.requires)),
        frontend=frontend_requirement(requires),
    )


def cell_plan(cell: Cell, *, cuda_home: Path | None, cache_dir: Path) -> ToolchainPlan:
    """The toolchain plan of `cell` (`cuda_home`: a system toolkit, else PyPI's); a cmake
    or torch cell's CUDA_HOME gets the CUDA libraries its matrix names."""
    in_cuda_home = backend_for(cell.build.backend).needs_nvcc
    return resolve(
        str(cell.cuda),
        cell.arch,
        cuda_home=cuda_home,
        cache_dir=cache_dir,
        cuda_libraries=cell.build.cuda_libraries if in_cuda_home else (),
        builds_in_cuda_home=in_cuda_home,
    )


def cuda_home_of(toolchain: Toolchain) -> Path | None:
    """The CUDA_HOME a cmake or torch cell builds with: the one made of the toolkit and the
    cell's CUDA libraries (without nvcc where PyPI has none), else nvcc's own tree; None
    where the toolchain has neither."""
    if toolchain.build_home is not None:
        return toolchain.build_home
    return toolchain.cuda_home if toolchain.plan.device_compiler == "nvcc" else None


def environment_of(cell: Cell) -> EnvironmentSpec | None:
    """The build environment of its own the cell's backend asks for (None: an isolated
    PEP 517 environment of the tool's Python)."""
    return backend_for(cell.build.backend).environment(cell_targets(cell))


def environment_python(spec: EnvironmentSpec, cache_dir: Path) -> Path:
    """The interpreter a cell's build runs in, once `spec` is provisioned in `cache_dir`."""
    return venv_python(cache_dir / spec.dirname)
