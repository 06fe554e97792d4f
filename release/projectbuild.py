"""One cell of any kernel project, built by its own build system: build, relabel, inspect.

`build_cell` is the path of a cell whose `build.backend` is `cmake` or `torch`: it checks
that the cell can build here (nvcc for its CUDA version, its CPU arch), runs the project's
PEP 517 build with the backend's inputs (release.backends), takes auditwheel's verdict,
gives the wheel the cell's local label by rewriting it (release.relabel) and its exact
platform tag, and inspects it: the checks of csrc's wheels, with the device code found in
every shared object (release.devicecode). A cell whose backend is `release` goes through
release.build as before.

`load_build_matrix` reads a matrix.yaml that has `build:` sections (the release's and each
CUDA version's) with the same file:line errors and rules as `release.matrix.load_matrix`.
`provision_build_tools` installs the pinned cmake and ninja from PyPI into the toolchain
cache. `doctor_rows` says per cell what its backend will use and receive.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from release import proc
from release.backends import (
    NVCC_HINT,
    PLACEMENT_HINT,
    BuildInputs,
    BuildRecipe,
    BuildSpec,
    BuildTools,
    NvccToolkit,
    build_inputs,
    cmake_architectures,
    merge,
    nvcc_problem,
    placement_problem,
    read_build_backend,
    spec_problems,
    targets_problem,
    torch_arch_list,
    with_path,
)
from release.build import (
    DEFAULT_EPOCH,
    CellFailure,
    auditwheel_problems,
    build_command,
    retag_command,
    show_command,
)
from release.devicecode import (
    ElfLister,
    MemberDeviceCode,
    coverage_problems,
    found_targets,
    scan,
)
from release.errors import ConfigError, ToolchainError
from release.fatbin import FatbinContents, FatbinLister
from release.inspect import WheelReport, inspect_wheel
from release.matrix import (
    Cell,
    CudaSpec,
    Matrix,
    MatrixSpec,
    _validate,
    parse_yaml,
    read_project,
)
from release.matrix import Project as MatrixProject
from release.relabel import RelabelError, relabel
from release.secrets import without_credentials
from release.targets import CudaVersion
from release.toolchain import (
    Pin,
    PinSet,
    Toolchain,
    ToolchainPlan,
    host_machine,
    host_platform,
    install_pinset,
)
from release.yamlspec import join_path, json_schema, load_document

# cmake and ninja for CMake-driven builds, from PyPI: the same on every machine, whatever
# cmake the machine has (CMake 4.x accepts the `f` targets: 100f-real).
BUILD_TOOL_PINS = (Pin("cmake", "4.4.5"), Pin("ninja", "1.13.2"))
# What inspect_wheel says of a wheel with no *.fatbin file: device code in a shared
# object answers it (see `inspect_project_wheel`).
_NO_FATBIN = "the wheel holds no fatbin: no GPU code would ever run"


# ---------------------------------------------------------------- the matrix with `build:`


@dataclass(frozen=True)
class CudaBuildSpec(CudaSpec):
    """The wheels of one CUDA version."""

    build: BuildSpec | None = field(
        default=None, metadata={"doc": "this CUDA version's build, over the release's"}
    )


@dataclass(frozen=True)
class MatrixBuildSpec(MatrixSpec):
    """The release matrix of a CUDA kernel project."""

    # yamlspec reads the hint; _validate reads the CudaSpec part of each entry.
    cuda: dict[str, CudaBuildSpec] = field(  # type: ignore[assignment]
        metadata={"doc": "one entry per CUDA version"}
    )
    build: BuildSpec | None = field(
        default=None, metadata={"doc": "how the kernel project is built (default: release)"}
    )


@dataclass(frozen=True, kw_only=True)
class BuildMatrix:
    matrix: Matrix
    recipes: Mapping[str, BuildRecipe]  # by CUDA version, as cells print it ("13.0")

    def recipe(self, cell: Cell) -> BuildRecipe:
        return self.recipes[str(cell.cuda)]


def build_matrix_json_schema() -> dict[str, Any]:
    schema = json_schema(MatrixBuildSpec)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "matrix.yaml"
    return schema


def load_build_matrix(path: Path) -> BuildMatrix:
    """`load_matrix` for a matrix with `build:` sections; every problem at once, as
    `matrix.yaml:LINE:COL: key.path: message`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"{path}: cannot read: {error}"]) from None
    spec, loader = load_document(MatrixBuildSpec, parse_yaml(text, path.name))
    matrix = None
    recipes: dict[str, BuildRecipe] = {}
    if spec is not None:
        found = read_project((path.parent / spec.project).resolve())
        if isinstance(found, str):
            loader.problem("project", found)
        else:
            project = MatrixProject(
                name=found[0], version=found[1], path=(path.parent / spec.project).resolve()
            )
            matrix = _validate(spec, project, path, loader)
        if spec.build is not None:
            for key, message in spec_problems(spec.build, merge(spec.build, None).backend, "build"):
                loader.problem(key, message)
        for key, entry in spec.cuda.items():
            recipe = merge(spec.build, entry.build)
            version = ""
            with contextlib.suppress(ValueError):  # the matrix's own rules report the key
                version = str(CudaVersion.parse(key))
                recipes[version] = recipe
            if entry.build is not None:
                where = join_path(join_path("cuda", key), "build")
                for problem_key, message in spec_problems(entry.build, recipe.backend, where):
                    loader.problem(problem_key, message)
            cells = [c for c in matrix.cells if str(c.cuda) == version] if matrix else []
            # the first cell that cannot be built is enough: the others share its ptx
            for cell in cells[:1]:
                problem = targets_problem(recipe.backend, cell.sms, cell.ptx)
                if problem is not None:
                    source = join_path("cuda", key) if entry.ptx is not None else "defaults"
                    loader.problem(join_path(source, "ptx"), problem)
    if loader.problems or matrix is None:
        ordered = sorted(
            loader.problems,
            key=lambda p: (p.position.line, p.position.column) if p.position else (0, 0),
        )
        raise ConfigError(
            list(dict.fromkeys(p.render(path.name) for p in ordered)),
            hint=f"fix {path.name}; `release matrix --schema` prints what it accepts",
        )
    return BuildMatrix(matrix=matrix, recipes=recipes)


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
) -> BuildTools:
    """cmake and ninja from PyPI into `cache_dir` (once), their binaries for the PATH.
    cmake's bin/ holds Python wrappers that need the package on sys.path: its binaries in
    cmake/data/bin come first; ninja's wheel puts its binary in bin/."""
    pinset = build_tools_pinset(host_arch or host_machine())
    root = cache_dir / pinset.dirname
    install_pinset(pinset, root, runner, python=python, env=without_credentials(env))
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


# ---------------------------------------------------------------- inspection


def inspect_project_wheel(
    filename: str,
    data: bytes,
    cell: Cell,
    *,
    list_fatbin: FatbinLister,
    list_elf: ElfLister,
) -> WheelReport:
    """`inspect_wheel` with the device code of every shared object held to the cell too."""
    listed: dict[str, FatbinContents] = {}

    def remembered(name: str, member: bytes) -> FatbinContents:
        if name not in listed:
            listed[name] = list_fatbin(name, member)
        return listed[name]

    members = scan(data, list_fatbin=remembered, list_elf=list_elf)
    report = inspect_wheel(filename, data, cell, list_fatbin=remembered)
    shared: list[MemberDeviceCode] = [m for m in members if m.kind == "shared object"]
    problems = [p for p in report.problems if not (p == _NO_FATBIN and members)]
    if members and shared:
        problems += coverage_problems(shared, cell.sms, cell.ptx)
    elif not members:
        problems = [p for p in problems if p != _NO_FATBIN]
        problems += coverage_problems((), cell.sms, cell.ptx)
    sms, ptx = found_targets(members)
    return replace(report, sms=sms, ptx=ptx, problems=tuple(problems))


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


def cell_inputs(cell: Cell, build: ProjectBuild) -> BuildInputs:
    pyproject = cell.project.path / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    return build_inputs(
        build.recipe,
        cell.sms,
        cell.ptx,
        nvcc_toolkit(build.toolchain),
        tools=build.tools,
        jobs=build.jobs,
        build_backend=read_build_backend(text),
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
        raise CellFailure("the PEP 517 build failed", proc.tail(built.output))
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
            raise CellFailure("retagging the wheel failed", proc.tail(retagged.output))
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

    def cells(self) -> tuple[str, ...]:
        return (self.cell, self.backend, self.device, self.tools, self.builds, self.receives)


def doctor_rows(
    cells: Sequence[Cell],
    recipes: Mapping[str, BuildRecipe],
    plans: Mapping[str, ToolchainPlan],
) -> list[BackendRow]:
    """Per cell: its backend, the device compiler and build tools it will use, where it
    builds, and what it receives from `release` (keys by `cell.id` in `plans`)."""
    rows = []
    for cell in cells:
        recipe = recipes[str(cell.cuda)]
        plan = plans[cell.id]
        missing = nvcc_problem(recipe.backend, str(cell.cuda), plan.device_compiler)
        if missing is not None:
            device = f"MISSING: {missing}; {NVCC_HINT.format(cuda=cell.cuda)}"
        elif plan.device is None:
            device = f"nvcc from {plan.cuda_home}"
        else:
            device = f"{plan.device_compiler} (PyPI {', '.join(plan.device.requirements)})"
        elsewhere = placement_problem(recipe.backend, cell.arch, plan.host_arch)
        builds = (
            "here"
            if elsewhere is None
            else f"not here: {elsewhere}; {PLACEMENT_HINT.format(arch=cell.arch)}"
        )
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
