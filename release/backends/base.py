"""What every backend is: the `Backend` protocol, what it is told of a cell (`CellTargets`)
and of the place it builds in (`BuildContext`), and what it gives the PEP 517 build
(`BuildInputs`). Pure: nothing here runs a process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from release.backends.archflags import ArchHints
from release.backends.recipe import BackendName, BuildRecipe
from release.errors import ConfigError
from release.fsutil import UnreadableDocument, toml_document
from release.targets import GpuTarget


@dataclass(frozen=True, kw_only=True)
class NvccToolkit:
    """The nvcc a backend compiles with: `root` holds bin/nvcc and include/."""

    root: Path
    version: str
    # PyPI's nvcc wheels keep libcudart_static.a and libcudadevrt.a in lib/, where nvcc's
    # profile (-L.../lib64) does not look: the linker needs LIBRARY_PATH to find them.
    library_dir: Path | None = None
    # False for the CUDA_HOME of a cell without device code whose CUDA has no nvcc on PyPI
    # (12.9): its headers and libraries, and a bin/nvcc that says why it cannot compile
    has_nvcc: bool = True

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"


@dataclass(frozen=True, kw_only=True)
class BuildTools:
    """Build tools from PyPI for the build's PATH (cmake and ninja binaries)."""

    path: tuple[Path, ...] = ()
    versions: tuple[str, ...] = ()  # `cmake 4.4.5`, `ninja 1.13.2`


@dataclass(frozen=True, kw_only=True)
class BuildInputs:
    """What a cell's PEP 517 build gets: variables, config settings, PATH entries first."""

    env: Mapping[str, str]
    config_settings: Mapping[str, str]
    path: tuple[Path, ...] = ()
    # written before the build runs; a text that starts with `#!` is written executable
    files: Mapping[Path, str] = field(default_factory=dict)

    def config_args(self) -> list[str]:
        return [f"-C{key}={value}" for key, value in sorted(self.config_settings.items())]


@dataclass(frozen=True, kw_only=True)
class CellTargets:
    """What a backend is told of the cell it builds."""

    cuda: str
    arch: str
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None
    local_label: str | None
    recipe: BuildRecipe
    build_backend: str | None = None  # the PEP 517 backend the project's pyproject names
    compress_mode: str | None = None  # nvcc's --compress-mode (None: the backend's default)
    # The cell's own axes where its backend has them (torch's: the pinned torch, its index,
    # the cell's CPython; None: not an axis of it), the project's other build requirements
    # (its pyproject's [build-system] requires) and the tool's PEP 517 frontend.
    torch: str | None = None
    torch_index: str | None = None
    python: str | None = None
    build_requires: tuple[str, ...] = ()
    frontend: str = ""


class EnvironmentSpec(Protocol):
    """A build environment of a backend's own, which a cell's PEP 517 build runs in
    (without isolation) instead of an isolated one of the tool's Python: what it holds,
    pure. release.toolchain.buildenv provisions it once per distinct one."""

    @property
    def python(self) -> str:
        """The CPython it is a venv of (`3.11`), found on PATH."""
        ...

    @property
    def label(self) -> str:
        """What it is, for the build log."""
        ...

    @property
    def dirname(self) -> str:
        """Its directory in the toolchain cache, named by a hash of what it holds."""
        ...

    def preview(self, root: Path) -> tuple[str, str]:
        """(key, text) of what the dry run says the cell builds against, made at `root`."""
        ...


@dataclass(frozen=True, kw_only=True)
class EnvironmentPaths:
    """A provisioned build environment as a backend's inputs see it: its CUDA_HOME, the
    cache directory it lies in, and its interpreter's headers (what no object may hold)."""

    cuda_home: Path
    cache_dir: Path
    python_include: Path | None = None


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    """What a backend is told of the place the cell builds in."""

    toolchain_env: Mapping[str, str] = field(default_factory=dict)  # csrc's RELEASE_* tools
    toolkit: NvccToolkit | None = None  # None where the toolchain has no nvcc
    tools: BuildTools = field(default_factory=BuildTools)
    jobs: int = 1
    device_cache: Path | None = None
    device_log: Path | None = None
    environment: EnvironmentPaths | None = None  # the backend's own, where it asks for one
    # Where the sources and the build's own files lie on this machine: what the objects
    # of a backend that keeps machine paths out of them must not depend on. The sources'
    # directory is the project's, or matrix.yaml's where a prepare step stages the project
    # from there (its script compiles files outside the project: DeepGEMM's csrc/).
    project_dir: Path | None = None
    build_dir: Path | None = None
    # sccache, which every compile of a backend that `uses_compile_cache` goes through
    compile_launcher: Path | None = None
    # The tool's own Python, which runs release.toolchain.nvccwrap for every CUDA compile of
    # an nvcc-driven backend, and where the first compile that asks for other targets than
    # the cell's records itself (None: no compile is checked)
    tool_python: Path | None = None
    arch_stop: Path | None = None
    # where the compile wrapper records the fatbins each compile wrote (backends.compiled)
    compile_records: Path | None = None


class Backend(Protocol):
    """One build system. A new one is a module beside this one, registered in
    release.backends.registry; the build pipeline does not change."""

    @property
    def name(self) -> BackendName: ...

    @property
    def needs_nvcc(self) -> bool:
        """It drives nvcc (so PyPI must have one, and it builds each CPU arch natively)."""
        ...

    @property
    def owned_env(self) -> frozenset[str]:
        """Variables it gets from the cell, which the matrix may not set."""
        ...

    @property
    def owned_settings(self) -> frozenset[str]:
        """Config settings it gets from the cell, which the matrix may not set."""
        ...

    def uses_compile_cache(self, device_compiler: str) -> bool:
        """Its compiles go through the context's `compile_launcher` (sccache), for a cell
        whose toolchain compiles device code with `device_compiler` (nvcc, nvrtc)."""
        ...

    @property
    def torch_axes(self) -> bool:
        """Its cells have torch's own axes: a torch version, a Python or an abi3 floor each,
        and a `{torch}` in the local label (the other backends take none of these)."""
        ...

    @property
    def ptx_beside_cubin(self) -> bool:
        """It adds PTX only to an SM it also builds (torch's `7.5+PTX`): a PTX-only build of
        its cell keeps that SM's cubin."""
        ...

    @property
    def labels_by_rewriting(self) -> bool:
        """Its build cannot set the cell's local label: the built wheel is rewritten to it
        (csrc's sets it at build time, and a wheel of another version is refused)."""
        ...

    @property
    def tag_remedy(self) -> str:
        """What to do when auditwheel finds only linux_* for its wheel ("" for nothing)."""
        ...

    def environment(self, cell: CellTargets) -> EnvironmentSpec | None:
        """The build environment of its own the cell builds in (None: an isolated PEP 517
        environment of the tool's Python)."""
        ...

    @property
    def arch_hints(self) -> ArchHints | None:
        """How it hands the cell's targets to the build, why a project's own arch flags win
        over that, and how a project honours it (None: its compiles are not checked)."""
        ...

    def setting_problem(self, name: str, value: str) -> str | None:
        """Why the matrix may not pass config setting `name`=`value` (besides owned ones)."""
        ...

    def targets_problem(self, sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
        """Why it cannot build exactly these targets, with the remedy; None if it can."""
        ...

    def inputs(self, cell: CellTargets, context: BuildContext) -> BuildInputs:
        """The inputs of the cell's PEP 517 build, before the matrix's own `env` and
        `config-settings`."""
        ...

    def describe(self, cell: CellTargets, build_tools: str) -> tuple[str, str]:
        """(the build tools it uses, what it receives), for `release doctor`; `build_tools`
        names the pinned cmake and ninja."""
        ...


def with_path(env: Mapping[str, str], first: Sequence[Path]) -> dict[str, str]:
    """`env` with the directories `first` ahead of its PATH."""
    out = dict(env)
    out["PATH"] = os.pathsep.join([*(str(p) for p in first), *filter(None, [env.get("PATH")])])
    return out


SETUPTOOLS_BACKENDS = frozenset({"setuptools.build_meta", "setuptools.build_meta:__legacy__"})
SCIKIT_BUILD_CORE = "scikit_build_core.build"


def setuptools_config(build_dir: Path) -> str:
    """DIST_EXTRA_CONFIG: setuptools' build/ and egg-info/ in the cell's own directory."""
    return f"[build]\nbuild_base = {build_dir}\n\n[egg_info]\negg_base = {build_dir}\n"


def out_of_tree_inputs(
    build_backend: str | None, build_dir: Path | None
) -> tuple[dict[str, str], dict[str, str], dict[Path, str]]:
    """(variables, config settings, files) that keep a build's own files in the cell's
    `build_dir`, never in the project's checkout: setuptools' build/ and egg-info (a project
    that names no backend gets setuptools' legacy one) through DIST_EXTRA_CONFIG, and
    scikit-build-core's build directory (a project's own `build-dir` may name one in the
    checkout). Nothing where the build has no directory of its own (a dry run)."""
    if build_dir is None:
        return {}, {}, {}
    if build_backend is None or build_backend in SETUPTOOLS_BACKENDS:
        config = build_dir / "setup.cfg"
        return {"DIST_EXTRA_CONFIG": str(config)}, {}, {config: setuptools_config(build_dir)}
    if build_backend == SCIKIT_BUILD_CORE:
        return {}, {"build-dir": str(build_dir / "cmake")}, {}
    return {}, {}, {}


def read_build_backend(pyproject: str | bytes) -> str | None:
    """[build-system] build-backend of a pyproject.toml's text (None if it names none);
    ConfigError naming the file where it is no TOML (never read as naming none)."""
    system = pyproject_table(pyproject).get("build-system")
    backend = system.get("build-backend") if isinstance(system, dict) else None
    return backend if isinstance(backend, str) else None


@functools.lru_cache(maxsize=4)
def pyproject_table(pyproject: str | bytes) -> Mapping[str, object]:
    """A pyproject.toml's text read by release.fsutil's bounded reader, once per text (a dry
    run asks it of each cell's backend and build environment: a 3 MB file took 50 s);
    ConfigError naming the file (and tomllib's line) where it is not TOML."""
    try:
        return MappingProxyType(toml_document(pyproject, "pyproject.toml"))
    except UnreadableDocument as error:
        raise ConfigError([str(error)], hint="fix pyproject.toml") from None
