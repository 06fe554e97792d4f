"""The tools a cell builds with: every pin (pins), the plan of a cell's toolchain (plan), and
provisioning it into the cache (provision). Import from here.

Its modules:

- `buildenv`: What a cell's backend is told of it (`cell_targets`), the build environment of its
  own that a backend asks for (`environment_of`).
- `cacheroot`: Where the cache lives: one root (`--cache-dir`, else `default_cache_dir`) with
  the provisioned toolchains under `toolchains/`.
- `cudahome`: The CUDA_HOME of a cmake or torch cell whose plan has CUDA libraries: the
  toolkit's nvcc tree with the headers, libraries and unversioned link names of the CUDA
  libraries it names (build.cuda-libraries), and a link stub of the driver's libcuda where
  it names `cuda`; without nvcc where PyPI has none and the cell compiles no device code.
- `envcache`: The torch environments kept within a size budget ($RELEASE_TORCH_ENV_BUDGET):
  held in use by each process that builds with one, pruned least recently used first, never
  one in use.
- `frontend`: The PEP 517 frontend of a cell whose isolated build gets the matrix's
  build.requires besides the project's own (`python -m release.toolchain.frontend`).
- `nvccwrap`: The program every CUDA compile of a torch or CMake cell goes through (`python -m
  release.toolchain.nvccwrap`).
- `pins`: Every tool pin in one file: the PyPI packages each CUDA version's device compiler
  comes from, the CUDA libraries a cell's CUDA_HOME gets, the host C compiler (zig), the
  fatbin inspector, the build tools of nvcc-driven backends (cmake, ninja), and the oldest
  pip that provisioning works with.
- `placement`: Where a cell builds in GitHub Actions: the runner and, where one is needed, the
  container (`release matrix --format github` gives both per cell).
- `plan`: The toolchain of a cell, pure: which pinned package sets a (CUDA version, CPU arch)
  needs (`toolchain_spec`), the plan for one cell (`resolve`).
- `projectmeta`: A project's name and version where its files compute them (setuptools-scm, a
  setup.py that reads a version file), asked of its PEP 517 backend.
- `provision`: Provisioning, the edge: `provision` installs a plan's pinned wheels into the
  cache once (pip --target into a temp dir, then a rename) and probes every tool's real version,
  through a `proc.Runner`; a pip too old for it stops before any download.
- `torchenv`: A torch cell's build environment: a venv of the cell's CPython holding exactly the
  pinned torch (never whatever the index serves) and the project's other build requirements
  (with the matrix's build.requires), and a CUDA_HOME assembled from the toolchain's and the
  CUDA library headers and link names that torch's own nvidia-* wheels bring.
"""

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
