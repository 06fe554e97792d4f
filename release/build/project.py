"""One cell of any kernel project, built by its own build system: build, relabel, inspect.

`build_cell` is the path of a cell whose `build.backend` is `cmake` or `torch`: it checks
that the cell can build here (nvcc for its CUDA version, its CPU arch), runs the project's
PEP 517 build with the backend's inputs (release.backends.recipe), takes auditwheel's verdict,
gives the wheel the cell's local label by rewriting it (release.build.relabel) and its exact
platform tag, and inspects it: the checks of csrc's wheels, with the device code found in
every shared object (release.inspection.devicecode). release.build.cells hands its cmake
and torch cells here, with the same wheel cache, log and manifest as csrc's; it builds
`release` cells itself.

`load_build_matrix` reads a matrix.yaml with each CUDA version's build recipe.
`provision_build_tools` installs the pinned cmake and ninja from PyPI into the toolchain
cache. `check_cells` stops a build before it starts where a cell cannot build here;
`doctor_rows` says per cell what its backend will use and receive.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release import proc
from release.backends.recipe import (
    NVCC_HINT,
    PLACEMENT_HINT,
    BuildInputs,
    BuildRecipe,
    BuildTools,
    NvccToolkit,
    build_inputs,
    cmake_architectures,
    nvcc_problem,
    placement_problem,
    read_build_backend,
    torch_arch_list,
    with_path,
)
from release.build.relabel import RelabelError, relabel
from release.credentials import without_credentials
from release.errors import ToolchainError
from release.inspection.certify import (
    DEFAULT_EPOCH,
    CellFailure,
    auditwheel_problems,
    build_command,
    retag_command,
    show_command,
)
from release.inspection.devicecode import ElfLister
from release.inspection.fatbin import FatbinLister
from release.inspection.wheel import WheelReport, inspect_wheel
from release.matrix import Cell, Matrix, load_matrix
from release.toolchain import (
    BUILD_TOOL_PINS,
    PinSet,
    Progress,
    Toolchain,
    ToolchainPlan,
    host_machine,
    host_platform,
    install_pinset,
)

# ---------------------------------------------------------------- the matrix with `build:`


@dataclass(frozen=True, kw_only=True)
class BuildMatrix:
    matrix: Matrix
    recipes: Mapping[str, BuildRecipe]  # by CUDA version, as cells print it ("13.0")

    def recipe(self, cell: Cell) -> BuildRecipe:
        return self.recipes[str(cell.cuda)]


def load_build_matrix(path: Path) -> BuildMatrix:
    """`load_matrix`, with each CUDA version's build recipe (also `cell.build`)."""
    matrix = load_matrix(path)
    return BuildMatrix(matrix=matrix, recipes={str(c.cuda): c.build for c in matrix.cells})


# ---------------------------------------------------------------- what a cell can build with


def require_buildable(recipe: BuildRecipe, cell: Cell, plan: ToolchainPlan) -> None:
    """ToolchainError (exit 3) where the cell cannot build here with its backend."""
    problem = nvcc_problem(recipe.backend, str(cell.cuda), plan.device_compiler)
    if problem is not None:
        raise ToolchainError(f"{cell.id}: {problem}", hint=NVCC_HINT.format(cuda=cell.cuda))
    problem = placement_problem(recipe.backend, cell.arch, plan.host_arch)
    if problem is not None:
        raise ToolchainError(f"{cell.id}: {problem}", hint=PLACEMENT_HINT.format(arch=cell.arch))


def nvcc_toolkit(toolchain: Toolchain) -> NvccToolkit:
    """The provisioned nvcc as a backend sees it; PyPI's keeps its static libraries in lib/."""
    if toolchain.plan.device_compiler != "nvcc" or toolchain.cuda_home is None:
        raise ToolchainError(
            f"CUDA {toolchain.plan.cuda}: this toolchain has no nvcc",
            hint=NVCC_HINT.format(cuda=toolchain.plan.cuda),
        )
    root = toolchain.cuda_home
    from_pypi = toolchain.plan.device is not None
    return NvccToolkit(
        root=root,
        version=toolchain.device_version,
        library_dir=root / "lib" if from_pypi and (root / "lib").is_dir() else None,
    )


def build_tools_pinset(host_arch: str) -> PinSet:
    return PinSet("cmake-ninja", BUILD_TOOL_PINS, host_platform(host_arch))


def provision_build_tools(
    cache_dir: Path,
    *,
    python: str = sys.executable,
    env: Mapping[str, str],
    runner: proc.Runner = proc.run,
    host_arch: str | None = None,
    progress: Progress | None = None,
) -> BuildTools:
    """cmake and ninja from PyPI into `cache_dir` (once), their binaries for the PATH.
    cmake's bin/ holds Python wrappers that need the package on sys.path: its binaries in
    cmake/data/bin come first; ninja's wheel puts its binary in bin/."""
    pinset = build_tools_pinset(host_arch or host_machine())
    root = cache_dir / pinset.dirname
    install_pinset(
        pinset, root, runner, python=python, env=without_credentials(env), progress=progress
    )
    dirs = (root / "cmake" / "data" / "bin", root / "bin")
    versions = []
    for directory, tool in zip(dirs, ("cmake", "ninja"), strict=True):
        binary = directory / tool
        if not binary.is_file():
            raise ToolchainError(
                f"{tool} not found in {root}",
                hint="the toolchain cache is incomplete: delete that directory and provision again",
            )
        done = runner([str(binary), "--version"], env=without_credentials(env))
        first = done.output.strip().splitlines()[0] if done.output.strip() else ""
        versions.append(f"{tool} {first.rsplit(' ', 1)[-1]}" if done.ok else f"{tool} ?")
    return BuildTools(path=dirs, versions=tuple(versions))


def check_cells(cells: Sequence[Cell], plans: Mapping[str, ToolchainPlan]) -> None:
    """One ToolchainError naming every cell that cannot build here, and where it can
    (`plans` by `cell.id`)."""
    problems: list[str] = []
    hints: list[str] = []
    for cell in cells:
        try:
            require_buildable(cell.build, cell, plans[cell.id])
        except ToolchainError as error:
            problems.append(error.message)
            if error.hint and error.hint not in hints:
                hints.append(error.hint)
    if problems:
        raise ToolchainError(
            "\n".join(problems),
            hint="; ".join([*hints, "or leave these cells out with --cuda / --arch"]),
        )


def build_tools_for(
    cells: Sequence[Cell],
    *,
    cache_dir: Path,
    python: str = sys.executable,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> BuildTools:
    """cmake and ninja from PyPI where a cell's backend drives nvcc; nothing (and no
    download) where every cell is csrc's."""
    if not any(cell.build.needs_nvcc for cell in cells):
        return BuildTools()
    return provision_build_tools(cache_dir, python=python, env=env, progress=progress)


# ---------------------------------------------------------------- inspection


def inspect_project_wheel(
    filename: str,
    data: bytes,
    cell: Cell,
    *,
    list_fatbin: FatbinLister,
    list_elf: ElfLister,
) -> WheelReport:
    """`inspect_wheel` with the device code of every shared object listed by `list_elf`."""
    return inspect_wheel(filename, data, cell, list_fatbin=list_fatbin, list_elf=list_elf)


# ---------------------------------------------------------------- one cell


@dataclass(frozen=True, kw_only=True)
class ProjectBuild:
    """What building one cell of a project needs besides the cell."""

    recipe: BuildRecipe
    toolchain: Toolchain
    tools: BuildTools
    python: str = sys.executable
    environ: Mapping[str, str] = field(default_factory=dict)
    epoch: int = DEFAULT_EPOCH
    jobs: int = 2
    list_fatbin: FatbinLister
    list_elf: ElfLister


def _project_backend(cell: Cell) -> str | None:
    """The PEP 517 build backend the project's pyproject.toml names."""
    pyproject = cell.project.path / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    return read_build_backend(text)


def cell_inputs(cell: Cell, build: ProjectBuild) -> BuildInputs:
    return build_inputs(
        build.recipe,
        cell.sms,
        cell.ptx,
        nvcc_toolkit(build.toolchain),
        tools=build.tools,
        jobs=build.jobs,
        build_backend=_project_backend(cell),
    )


# The inputs that name where the provisioned nvcc is: PyPI's nvcc has no path before
# it is installed.
TOOLKIT_INPUTS = frozenset(
    {
        "CMAKE_ARGS",
        "CUDACXX",
        "CUDA_HOME",
        "CUDAToolkit_ROOT",
        "LIBRARY_PATH",
        "cmake.define.CMAKE_CUDA_COMPILER",
    }
)


def planned_inputs(cell: Cell, plan: ToolchainPlan, *, jobs: int) -> BuildInputs:
    """What the cell's build by a cmake or torch backend receives, as far as it is known
    before anything is provisioned (a dry run): all of it with a system toolkit; without
    the toolkit's paths (TOOLKIT_INPUTS) where nvcc comes from PyPI."""
    root = plan.cuda_home if plan.device is None else None
    toolkit = NvccToolkit(root=root or Path("nvcc"), version=plan.cuda)
    inputs = build_inputs(
        cell.build,
        cell.sms,
        cell.ptx,
        toolkit,
        tools=BuildTools(),
        jobs=jobs,
        build_backend=_project_backend(cell),
    )
    if root is not None:
        return inputs
    return BuildInputs(
        env={k: v for k, v in inputs.env.items() if k not in TOOLKIT_INPUTS},
        config_settings={
            k: v for k, v in inputs.config_settings.items() if k not in TOOLKIT_INPUTS
        },
    )


def cell_environment(inputs: BuildInputs, build: ProjectBuild) -> dict[str, str]:
    """The build's environment: this process's without credentials and without RELEASE_*
    (csrc's inputs), the backend's inputs, the tools first on PATH, SOURCE_DATE_EPOCH."""
    base = {
        k: v for k, v in without_credentials(build.environ).items() if not k.startswith("RELEASE_")
    }
    env = with_path(base, [*inputs.path, Path(build.python).parent])
    env.update(inputs.env)
    env["SOURCE_DATE_EPOCH"] = str(build.epoch)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _tag_problems(output: str, cell: Cell) -> list[str]:
    problems = auditwheel_problems(output, cell)
    return [
        p + " (nvcc links against this machine's glibc: set the cell's manylinux to the "
        "level auditwheel finds, or build in a manylinux container: the release "
        "workflow's cibuildwheel builder)"
        if p.startswith("auditwheel: the wheel is only")
        else p
        for p in problems
    ]


def build_cell(
    cell: Cell,
    build: ProjectBuild,
    *,
    workdir: Path,
    log: Path,
    runner: proc.Runner = proc.run,
) -> tuple[Path, WheelReport]:
    """Build, relabel, retag and inspect the wheel of `cell` in `workdir`; returns the final
    wheel (named `cell.wheel_filename`) and its report. Raises ToolchainError where the cell
    cannot build here and CellFailure where the build or a check fails."""
    require_buildable(build.recipe, cell, build.toolchain.plan)
    inputs = cell_inputs(cell, build)
    env = cell_environment(inputs, build)
    outdir = workdir / "built"
    command = [*build_command(build.python, cell.project.path, outdir), *inputs.config_args()]
    built = runner(command, env=env, log=log)
    if built.returncode != 0:
        raise CellFailure(
            proc.failure("the PEP 517 build", built, detail=False), proc.tail(built.output)
        )
    wheels = sorted(outdir.glob("*.whl"))
    if len(wheels) != 1:
        raise CellFailure(f"the build produced {len(wheels)} wheels, expected 1")
    wheel = wheels[0]
    shown = runner(show_command(build.python, wheel), env=env, log=log)
    problems = _tag_problems(shown.output, cell)
    if shown.returncode != 0 or problems:
        raise CellFailure("; ".join(problems) or "auditwheel show failed", proc.tail(shown.output))
    wheel = relabelled(wheel, cell)
    if wheel.name != cell.wheel_filename:
        retagged = runner(retag_command(build.python, wheel, cell), env=env, log=log)
        wheel = wheel.parent / cell.wheel_filename
        if retagged.returncode != 0 or not wheel.is_file():
            raise CellFailure(
                proc.failure("retagging the wheel", retagged, detail=False),
                proc.tail(retagged.output),
            )
    report = inspect_project_wheel(
        wheel.name,
        wheel.read_bytes(),
        cell,
        list_fatbin=build.list_fatbin,
        list_elf=build.list_elf,
    )
    if not report.ok:
        raise CellFailure("inspection failed: " + "; ".join(report.problems), report=report)
    return wheel, report


def relabelled(wheel: Path, cell: Cell) -> Path:
    """The wheel with the cell's version (its local label): rewritten beside the original,
    which is removed; the same path where the version is already the cell's."""
    stem_version = wheel.name.split("-")[1]
    if stem_version == str(cell.version):
        return wheel
    try:
        result = relabel(wheel.name, wheel.read_bytes(), cell.local_label)
    except RelabelError as error:
        raise CellFailure(f"cannot give the wheel version {cell.version}: {error}") from None
    if result.new_version != str(cell.version):
        raise CellFailure(
            f"the build made version {result.old_version}, the cell is {cell.version} "
            "(only the local label is rewritten, never the release)"
        )
    target = wheel.parent / result.filename
    target.write_bytes(result.data)
    wheel.unlink()
    return target


def build_in_staging(
    cell: Cell,
    build: ProjectBuild,
    *,
    out: Path,
    log: Path,
    runner: proc.Runner = proc.run,
) -> tuple[Path, WheelReport]:
    """`build_cell` in a staging folder under `out`; the final wheel is moved into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cell.id}.", dir=out))
    try:
        wheel, report = build_cell(cell, build, workdir=staging, log=log, runner=runner)
        final = out / wheel.name
        shutil.move(str(wheel), final)
        return final, report
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------- doctor


@dataclass(frozen=True)
class BackendRow:
    cell: str
    backend: str
    device: str
    tools: str
    builds: str
    receives: str

    COLUMNS = ("cell", "backend", "device compiler", "build tools", "builds", "receives")
    KEYS = ("cell", "backend", "device_compiler", "build_tools", "builds", "receives")

    def cells(self) -> tuple[str, ...]:
        return (self.cell, self.backend, self.device, self.tools, self.builds, self.receives)


def doctor_rows(cells: Sequence[Cell], plans: Mapping[str, ToolchainPlan]) -> list[BackendRow]:
    """Per cell: its backend, the device compiler and build tools it will use, where it
    builds, and what it receives from `release` (keys by `cell.id` in `plans`)."""
    rows = []
    for cell in cells:
        recipe = cell.build
        plan = plans[cell.id]
        missing = nvcc_problem(recipe.backend, str(cell.cuda), plan.device_compiler)
        if missing is not None:
            device = f"MISSING: {missing}; {NVCC_HINT.format(cuda=cell.cuda)}"
        elif plan.device is None:
            device = f"nvcc from {plan.cuda_home}"
        else:
            device = f"{plan.device_compiler} (PyPI {', '.join(plan.device.requirements)})"
        elsewhere = placement_problem(recipe.backend, cell.arch, plan.host_arch)
        builds = "here"
        if elsewhere is not None:
            builds = f"not here: {elsewhere}; {PLACEMENT_HINT.format(arch=cell.arch)}"
        elif missing is not None:
            builds = f"not here: no nvcc for CUDA {cell.cuda} (the device compiler says how)"
        if recipe.backend == "release":
            tools = "csrc's backend (zig for the host library)"
            receives = "RELEASE_SMS, RELEASE_PTX, RELEASE_TARGET_ARCH, RELEASE_LOCAL_LABEL, ..."
        elif recipe.backend == "cmake":
            tools = f"PyPI {', '.join(str(p) for p in BUILD_TOOL_PINS)}; host g++ from PATH"
            receives = (
                "CMAKE_CUDA_ARCHITECTURES / CUDAARCHS "
                f"{_cmake(cell)}, CUDACXX, CUDA_HOME, CUDAToolkit_ROOT, "
                "CMAKE_BUILD_PARALLEL_LEVEL; label by rewriting the wheel"
            )
        else:
            tools = "the project's build requirements (torch, setuptools); host g++ from PATH"
            receives = (
                f"TORCH_CUDA_ARCH_LIST {_torch(cell)}, CUDA_HOME, MAX_JOBS, NVCC_THREADS; "
                "label by rewriting the wheel"
            )
        if recipe.env or recipe.config_settings:
            names = [k for k, _ in recipe.env] + [f"-C{k}" for k, _ in recipe.config_settings]
            receives += f"; from the matrix: {', '.join(names)}"
        rows.append(
            BackendRow(
                cell=cell.id,
                backend=recipe.backend,
                device=device,
                tools=tools,
                builds=builds,
                receives=receives,
            )
        )
    return rows


def _cmake(cell: Cell) -> str:
    return cmake_architectures(cell.sms, cell.ptx)


def _torch(cell: Cell) -> str:
    try:
        return torch_arch_list(cell.sms, cell.ptx)
    except ValueError as error:
        return f"(cannot: {error})"
