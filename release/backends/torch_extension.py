"""setuptools projects with torch's CUDAExtension (vLLM, flash-attention):
TORCH_CUDA_ARCH_LIST, CUDA_HOME, MAX_JOBS, NVCC_THREADS; the local label by rewriting the
built wheel. The build's own files go to a directory of the cell's (never the project's
build/ or egg-info), and no machine path reaches the objects: the same commit gives the
same bytes in any checkout and cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from release.backends.archflags import ArchHints
from release.backends.base import (
    BuildContext,
    BuildInputs,
    CellTargets,
    NvccToolkit,
    setuptools_config,
)
from release.backends.nvcc import (
    CHECK_VARIABLES,
    NVCC_TAG_REMEDY,
    check_inputs,
    compress_flags,
    family_problem,
    require_toolkit,
)
from release.backends.recipe import BackendName
from release.targets import GpuTarget

CXX_WRAPPER_PATH = "launch/g++"  # in a torch cell's CUDA_HOME (release.toolchain.torchenv)

ARCH_HINTS = ArchHints(
    variable="TORCH_CUDA_ARCH_LIST",
    cause=(
        "torch's cpp_extension ignores TORCH_CUDA_ARCH_LIST when a project passes its own "
        "-gencode or -arch flags (any nvcc flag of extra_compile_args with 'arch' in it), so "
        "nvcc builds the project's list instead of the cell's"
    ),
    honour=(
        "make the project's setup.py honour TORCH_CUDA_ARCH_LIST (add its own -gencode "
        "list only where TORCH_CUDA_ARCH_LIST is unset)"
    ),
    arch_file="setup.py",
    gencode_sits="instead of",
    literal_source="setup.py",
)


@dataclass(frozen=True, kw_only=True)
class TorchEnvSpec:
    """What a torch cell's build environment holds (release.toolchain.torchenv makes it): a
    venv of the cell's Python with exactly the pinned torch (from `index_url` alone where
    one is named), the project's other build requirements and the tool's PEP 517
    frontend, and a CUDA_HOME for it; its key names its cache directory."""

    torch: Version
    cuda: str
    arch: str
    python: str  # "3.11"
    index_url: str | None
    requirements: tuple[str, ...]  # the project's build requirements other than torch
    frontend: str  # the PEP 517 frontend that runs the build in it: "build==1.2.2"

    @property
    def key(self) -> str:
        blob = json.dumps(
            {
                "torch": str(self.torch),
                "cuda": self.cuda,
                "arch": self.arch,
                "python": self.python,
                "index": self.index_url,
                "requirements": sorted(self.requirements),
                "frontend": self.frontend,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def dirname(self) -> str:
        return f"torch-{self.torch}-cu{self.cuda.replace('.', '')}-py{self.python}-{self.key}"

    @property
    def label(self) -> str:
        return f"torch {self.torch} (CUDA {self.cuda}, Python {self.python})"

    def preview(self, root: Path) -> tuple[str, str]:
        return (
            "torch",
            f"torch {self.torch} for Python {self.python}, from "
            f"{self.index_url or 'pip index'}, in {root}",
        )


def torch_env_of(cell: CellTargets) -> TorchEnvSpec | None:
    """The build environment of a torch cell (None for a cell without a torch)."""
    if cell.torch is None:
        return None
    return TorchEnvSpec(
        torch=Version(cell.torch),
        cuda=cell.cuda,
        arch=cell.arch,
        python=cell.python or "",
        index_url=cell.torch_index,
        requirements=cell.build_requires,
        frontend=cell.frontend,
    )


def torch_arch(target: GpuTarget) -> str:
    """A target as torch spells it: 75 -> `7.5`, 90a -> `9.0a`, 100f -> `10.0f`, 121 -> `12.1`."""
    return f"{target.number // 10}.{target.number % 10}{target.suffix}"


def targets_problem(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
    """Why torch cannot build exactly these targets: nvcc's sm_N with sm_Nf, or PTX on an SM
    without its cubin."""
    return family_problem(sms) or _ptx_problem(sms, ptx)


def _ptx_problem(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
    if ptx is not None and GpuTarget(ptx.number) not in sms:
        return (
            f"torch's TORCH_CUDA_ARCH_LIST can only add PTX to an SM it also builds a cubin "
            f"for ({torch_arch(ptx)}+PTX): add {ptx.number} to sms, or set ptx to one of them"
        )
    return None


def torch_arch_list(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str:
    """TORCH_CUDA_ARCH_LIST: `7.5;8.0;8.6;8.9;9.0;10.0+PTX`. torch's cpp_extension turns each
    entry into `-gencode=arch=compute_XX,code=sm_XX` and a `+PTX` entry also into
    `code=compute_XX`, so PTX rides on an SM that is built too (see `targets_problem`)."""
    problem = targets_problem(sms, ptx)
    if problem is not None:
        raise ValueError(problem)
    parts = []
    for target in sms:
        entry = torch_arch(target)
        if ptx is not None and target == GpuTarget(ptx.number):
            entry += "+PTX"
        parts.append(entry)
    return ";".join(parts)


def torch_inputs(
    sms: Sequence[GpuTarget], ptx: GpuTarget | None, toolkit: NvccToolkit, *, jobs: int
) -> dict[str, str]:
    """The environment of a setuptools build with torch's CUDAExtension; a cell without
    device code (device-code: none) gets no TORCH_CUDA_ARCH_LIST."""
    arch_list = torch_arch_list(sms, ptx)
    return {
        **({"TORCH_CUDA_ARCH_LIST": arch_list} if arch_list else {}),
        "CUDA_HOME": str(toolkit.root),
        "MAX_JOBS": str(jobs),
        "NVCC_THREADS": "1" if jobs < 4 else "2",
    }


def prefix_maps(context: BuildContext) -> list[str]:
    """GCC's -ffile-prefix-map for each machine path the objects would otherwise hold
    (debug info, __FILE__); later maps win, so the project's comes first. Paths with
    white space cannot ride in a flags variable and are left out."""
    environment = context.environment
    named = [
        (context.project_dir, "."),
        (environment.cache_dir if environment else None, "toolchains"),
        (environment.python_include if environment else None, "python-include"),
        (context.build_dir, "build"),
    ]
    maps = []
    for path, name in named:
        if path is None:
            continue
        # a compiler may see either spelling of a path behind a link (a cache whose
        # toolchains are linked from elsewhere, a checkout under a linked home)
        for spelling in dict.fromkeys((str(path), str(path.resolve()))):
            if not any(c.isspace() for c in spelling):
                maps.append(f"-ffile-prefix-map={spelling}={name}")
    return maps


def reproducible_inputs(context: BuildContext) -> tuple[dict[str, str], dict[Path, str]]:
    """Variables and files that keep a torch build's bytes to its sources: the prefix maps
    for the host compiler (setuptools adds CPPFLAGS to torch's c++ and link lines; CFLAGS
    would replace Python's) and through nvcc, and the sources' root for CUDA_HOME's nvcc
    wrapper (release.toolchain.torchenv)."""
    maps = prefix_maps(context)
    env = {
        "CPPFLAGS": " ".join(maps),
        "RELEASE_CXX_FLAGS": " ".join(maps),  # CUDA_HOME's c++ wrapper adds them
        "NVCC_APPEND_FLAGS": " ".join(f"-Xcompiler={m}" for m in maps),
    }
    if context.project_dir is not None:
        env["RELEASE_NVCC_SOURCE_ROOT"] = str(context.project_dir)
    files: dict[Path, str] = {}
    if context.build_dir is not None:
        config = context.build_dir / "setup.cfg"
        env["DIST_EXTRA_CONFIG"] = str(config)
        files[config] = setuptools_config(context.build_dir)
    return {k: v for k, v in env.items() if v}, files


def launcher_inputs(launcher: Path, cuda_home: Path) -> dict[str, str]:
    """Every compile through `launcher`: CUDA_HOME's nvcc wrapper and its C++ wrapper
    (named g++, as torch's compiler check wants) run their compiler through it."""
    return {
        "RELEASE_COMPILE_LAUNCHER": str(launcher),
        "CXX": str(cuda_home / CXX_WRAPPER_PATH),
    }


class TorchBackend:
    name: BackendName = "torch"
    needs_nvcc = True
    owned_env = frozenset(
        {
            "TORCH_CUDA_ARCH_LIST",
            "CUDA_HOME",
            "DIST_EXTRA_CONFIG",
            "RELEASE_NVCC_SOURCE_ROOT",
            "RELEASE_COMPILE_LAUNCHER",
            "RELEASE_CXX_FLAGS",
            *CHECK_VARIABLES,
        }
    )
    owned_settings: frozenset[str] = frozenset()
    torch_axes = True
    ptx_beside_cubin = True
    labels_by_rewriting = True
    tag_remedy = NVCC_TAG_REMEDY
    arch_hints: ArchHints | None = ARCH_HINTS

    def environment(self, cell: CellTargets) -> TorchEnvSpec | None:
        return torch_env_of(cell)

    def uses_compile_cache(self, device_compiler: str) -> bool:
        return True  # nvcc from the cell's toolkit, whatever csrc's device compiler

    def setting_problem(self, name: str, value: str) -> str | None:
        return None

    def targets_problem(self, sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
        return targets_problem(sms, ptx)

    def inputs(self, cell: CellTargets, context: BuildContext) -> BuildInputs:
        toolkit = require_toolkit(context, self.name, cell.cuda)
        if context.environment is not None:
            toolkit = replace(toolkit, root=context.environment.cuda_home)
        env = torch_inputs(cell.sms, cell.ptx, toolkit, jobs=context.jobs)
        env.update(check_inputs(cell.sms, cell.ptx, cell.cuda, context))
        reproducible, files = reproducible_inputs(context)
        env.update(reproducible)
        if context.compile_launcher is not None:
            env.update(launcher_inputs(context.compile_launcher, toolkit.root))
        nvcc_flags = [env.get("NVCC_APPEND_FLAGS", ""), *compress_flags(cell.compress_mode)]
        if any(nvcc_flags):
            env["NVCC_APPEND_FLAGS"] = " ".join(filter(None, nvcc_flags))
        return BuildInputs(env=env, config_settings={}, path=context.tools.path, files=files)

    def describe(self, cell: CellTargets, build_tools: str) -> tuple[str, str]:
        try:
            arch_list = torch_arch_list(cell.sms, cell.ptx) or "(none: no device code)"
        except ValueError as error:
            arch_list = f"(cannot: {error})"
        return (
            "the pinned torch and the project's other build requirements in a venv of the "
            "cell's Python (no build isolation); host g++ from PATH",
            f"TORCH_CUDA_ARCH_LIST {arch_list}, CUDA_HOME, MAX_JOBS, NVCC_THREADS"
            + "".join(f", NVCC_APPEND_FLAGS {f}" for f in compress_flags(cell.compress_mode))
            + "; label by rewriting the wheel",
        )
