"""What a build would do, known before anything is provisioned: per cell its backend, the
device and host compilers, where it builds, what it receives (`release build --dry-run`)
and the doctor's backend rows. Plans in, records out; what is read is each project's
pyproject.toml (its PEP 517 backend) and setup.py, and for a stable-ABI torch cell the torch
releases of its index (which torch it must build against: `stable_torch`); nothing is
provisioned or run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.backends import (
    NVCC_HINT,
    PLACEMENT_HINT,
    BuildContext,
    BuildInputs,
    NvccToolkit,
    backend_for,
    build_inputs,
    nvcc_problem,
    placement_problem,
)
from release.backends.archflags import LiteralFlags, cell_request, literal_warning
from release.building.archstop import project_setup_py
from release.building.pipeline import build_command
from release.building.preparestep import step_of
from release.building.settings import BuildSettings
from release.building.torchcell import IndexReader, index_torches, run_reader
from release.errors import ToolchainError
from release.inspection.stabletorch import NoTorchForCuda, build_torch_problem, oldest_admitted
from release.matrix import Cell
from release.project.archchanges import arch_list_changes, torch_arch_changes
from release.project.setuppy import SetupPy, as_built
from release.project.stableabi import StableAbi, stable_abi_note, stable_abi_warning
from release.project.targetsenv import targets_variable
from release.toolchain import BUILD_TOOL_PINS, ToolchainPlan
from release.toolchain.buildenv import cell_targets, environment_of, environment_python

NVCC_HOST_CC = "g++ from PATH, driven by nvcc"  # cmake and torch: nvcc picks the host compiler
HOST_ONLY_CC = "g++ from PATH (the build's own: no device code, nvcc runs nothing)"

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


def planned_inputs(
    cell: Cell,
    plan: ToolchainPlan,
    *,
    jobs: int,
    device_cache: Path | None = None,
    device_log: Path | None = None,
) -> BuildInputs:
    """What the cell's build receives, as far as it is known before anything is
    provisioned (a dry run): all of it with a system toolkit; without the toolkit's paths
    (TOOLKIT_INPUTS) where nvcc comes from PyPI."""
    root = plan.cuda_home if plan.device is None else None
    context = BuildContext(
        toolchain_env={"RELEASE_DEVICE_COMPILER": plan.device_compiler},
        toolkit=NvccToolkit(root=root or Path("nvcc"), version=plan.cuda),
        jobs=jobs,
        device_cache=device_cache,
        device_log=device_log,
    )
    inputs = build_inputs(cell_targets(cell), context)
    if root is not None or not backend_for(cell.build.backend).needs_nvcc:
        return BuildInputs(env=inputs.env, config_settings=inputs.config_settings)
    return BuildInputs(
        env={k: v for k, v in inputs.env.items() if k not in TOOLKIT_INPUTS},
        config_settings={
            k: v for k, v in inputs.config_settings.items() if k not in TOOLKIT_INPUTS
        },
    )


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


def _device(cell: Cell, plan: ToolchainPlan, missing: str | None) -> str:
    if missing is not None:
        return f"MISSING: {missing}; {NVCC_HINT.format(cuda=cell.cuda)}"
    named = plan.libraries_text()
    libraries = f"; {named}" if named else ""
    if plan.device is None:
        return f"nvcc from {plan.cuda_home}{libraries}"
    if plan.device_compiler != "nvcc" and backend_for(cell.build.backend).needs_nvcc:
        # a cell without device code: its CUDA_HOME holds the libraries alone
        return f"none (no device code, no nvcc){libraries}"
    return f"{plan.device_compiler} (PyPI {', '.join(plan.device.requirements)}){libraries}"


def doctor_row(cell: Cell, plan: ToolchainPlan) -> BackendRow:
    """The cell's backend, the device compiler and build tools it will use, where it
    builds, and what it receives from `release`."""
    backend = backend_for(cell.build.backend)
    missing = (
        None if cell.host_only else nvcc_problem(backend.name, str(cell.cuda), plan.device_compiler)
    )
    elsewhere = placement_problem(backend.name, cell.arch, plan.host_arch)
    builds = "here"
    if elsewhere is not None:
        builds = f"not here: {elsewhere}; {PLACEMENT_HINT.format(arch=cell.arch)}"
    elif missing is not None:
        builds = f"not here: no nvcc for CUDA {cell.cuda} (the device compiler says how)"
    pins = ", ".join(str(p) for p in BUILD_TOOL_PINS)
    tools, receives = backend.describe(cell_targets(cell), pins)
    recipe = cell.build
    if recipe.env or recipe.targets_env or recipe.config_settings:
        names = [k for k, _ in recipe.env] + [f"{k} (targets)" for k, _ in recipe.targets_env]
        names += [f"-C{k}" for k, _ in recipe.config_settings]
        receives += f"; from the matrix: {', '.join(names)}"
    if recipe.requires:
        receives += f"; build requirements from the matrix: {', '.join(recipe.requires)}"
    return BackendRow(
        cell=cell.id,
        backend=recipe.backend,
        device=_device(cell, plan, missing),
        tools=tools,
        builds=builds,
        receives=receives,
    )


def doctor_rows(cells: Sequence[Cell], plans: Mapping[str, ToolchainPlan]) -> list[BackendRow]:
    return [doctor_row(cell, plans[cell.id]) for cell in cells]


def _compilers(cell: Cell, plan: ToolchainPlan, row: BackendRow) -> tuple[str, str]:
    """(device compiler, host C compiler) as a dry run names them."""
    if backend_for(cell.build.backend).needs_nvcc:
        return row.device, HOST_ONLY_CC if cell.host_only else NVCC_HOST_CC
    device = (
        f"nvcc from {plan.cuda_home}"
        if plan.device is None
        else f"{plan.device_compiler} ({', '.join(plan.device.requirements)})"
    )
    host = (
        " ".join(plan.system_cc or ())
        if plan.host_cc is None
        else f"zig ({plan.host_cc.requirements[0]})"
    )
    return device, host


@dataclass(frozen=True, kw_only=True)
class PlannedCell:
    """What a dry run says of one cell: its backend and where it builds, compilers, build
    inputs, config settings, the command, and what it builds against (its backend's own
    environment: a key of the document and what it says there)."""

    cell: str
    wheel: str
    backend: str
    builds: str
    device_compiler: str
    host_cc: str
    inputs: Mapping[str, str]
    config_settings: Mapping[str, str]
    command: tuple[str, ...]
    against: tuple[str, str] | None = None
    stable_abi: str | None = None
    stable_torch: str | None = None  # the torch a stable-ABI cell builds against, and why
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what its wheel is held to besides every wheel's checks
    prepare: str | None = None  # the release's prepare step, as it would run for the cell

    def document(self) -> dict[str, Any]:
        """The cell in `release build --dry-run --json`."""
        return {
            **(dict([self.against]) if self.against is not None else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"stable_abi": self.stable_abi} if self.stable_abi is not None else {}),
            **({"stable_torch": self.stable_torch} if self.stable_torch is not None else {}),
            **({"warnings": list(self.warnings)} if self.warnings else {}),
            "cell": self.cell,
            "wheel": self.wheel,
            "backend": self.backend,
            "builds": self.builds,
            "device_compiler": self.device_compiler,
            "host_cc": self.host_cc,
            "inputs": dict(self.inputs),
            "config_settings": dict(self.config_settings),
            **({"prepare": self.prepare} if self.prepare is not None else {}),
            "command": list(self.command),
        }


@dataclass(frozen=True, kw_only=True)
class StableTorch:
    """What is said of the torch a stable-ABI torch cell builds against: which and why, or
    why that is not known, and why the build refuses matrix.yaml's torch (if it does)."""

    said: str | None = None
    unknown: str | None = None
    refused: str | None = None
    where: str = ""  # the condition its define holds under, said beside each

    def warning(self, cell: Cell) -> str | None:
        """The dry run's warning of the cell, if any."""
        if self.unknown is not None:
            what = "the torch a stable-ABI build must use is not known"
            return f"{cell.id}: {what}{self.where}: {self.unknown}"
        if self.refused is not None:
            return f"{cell.id}: the build will fail{self.where}: {self.refused}"
        return None


def stable_torch(
    cell: Cell, abi: StableAbi | None, read_index: IndexReader = index_torches
) -> StableTorch:
    """The torch a stable-ABI torch cell builds against (the oldest its wheel admits on the
    cell's CUDA major, read from its index), and whether the build refuses matrix.yaml's
    (an empty record: not such a cell, or its target is computed)."""
    if abi is None or abi.target is None or cell.torch is None:
        return StableTorch()
    where = f" (where the condition at {abi.condition} holds)" if abi.condition else ""
    try:
        torches = read_index(cell, abi.target)
        oldest = oldest_admitted(torches, abi.target, cell.cuda.major)
    except (ToolchainError, NoTorchForCuda) as error:
        why = error.message if isinstance(error, ToolchainError) else str(error)
        return StableTorch(unknown=why, where=where)
    said = oldest.said()
    if cell.torch != oldest.version and cell.newer_torch:
        said = f"torch {cell.torch}, newer on purpose (torch-build: newer) than {said}"
    refused = build_torch_problem(oldest, cell.torch, cell.newer_torch)
    return StableTorch(said=said + where, refused=refused, where=where)


def refused_torches(cells: Sequence[Cell], read_index: IndexReader = index_torches) -> list[str]:
    """What stops a build before anything is provisioned: a stable-ABI cell (setup.py's
    define holds unconditionally) whose matrix.yaml torch is not the oldest its wheel
    admits, without torch-build: newer. Where the index cannot be read, the build's own
    check after the compile says so."""
    refused = []
    for cell in cells:
        read = project_setup_py(cell)
        abi = read[1].stable_abi if read is not None else None
        if abi is None or abi.condition is not None:
            continue
        found = stable_torch(cell, abi, read_index)
        if found.refused is not None:
            refused.append(f"{cell.id}: {found.refused}")
    return refused


def planned(settings: BuildSettings, cell: Cell, plan: ToolchainPlan) -> PlannedCell:
    """What a dry run says of one cell."""
    row = doctor_row(cell, plan)
    inputs = planned_inputs(
        cell,
        plan,
        jobs=settings.compile_jobs_of(cell).jobs,
        device_cache=settings.device_cache,
        device_log=settings.device_log,
    )
    device, host = _compilers(cell, plan, row)
    python, against = settings.python, None
    spec = environment_of(cell)
    if spec is not None:  # it builds in its backend's own environment, without isolation
        python = str(environment_python(spec, settings.toolchain_dir))
        against = spec.preview(settings.toolchain_dir / spec.dirname)
    step = step_of(settings.matrix, cell)
    built = step.build_dir if step is not None else settings.matrix.project.path
    command = build_command(
        python, built, settings.out, isolated=spec is None, requires=cell.build.requires
    )
    env = {**inputs.env, "SOURCE_DATE_EPOCH": str(settings.epoch)}
    read = project_setup_py(cell)
    abi = read[1].stable_abi if read is not None else None
    crossed = stable_abi_warning(abi) if abi is not None else None
    torch = stable_torch(cell, abi, run_reader(settings.torch_indexes))
    refused = torch.warning(cell)
    return PlannedCell(
        notes=cell_notes(cell),
        against=against,
        stable_abi=stable_abi_note(abi) if abi is not None else None,
        stable_torch=torch.said,
        warnings=(
            *arch_warnings(cell, read),
            *([crossed] if crossed else []),
            *([refused] if refused else []),
        ),
        cell=cell.id,
        wheel=cell.wheel_filename,
        backend=cell.build.backend,
        builds=row.builds,
        device_compiler=device,
        host_cc=host,
        inputs=dict(sorted(env.items())),
        config_settings=dict(sorted(inputs.config_settings.items())),
        command=(*command, *inputs.config_args()),
        prepare=step.describe(str(cell.version)) if step is not None else None,
    )


HOST_ONLY_NOTE = (
    "no device code (device-code: none): its wheel must hold no fatbin, cubin or PTX file "
    "and no shared object with a fatbin section"
)
PY3_NONE_NOTE = (
    "one py3-none wheel (python: any) built with Python {python}: its shared objects must "
    "use no Python C-API"
)


def cell_notes(cell: Cell) -> tuple[str, ...]:
    """What the dry run says the cell's wheel is held to besides every wheel's checks: no
    device code at all, no Python C-API for a py3-none torch wheel."""
    notes = [HOST_ONLY_NOTE] if cell.host_only else []
    if cell.torch is not None and cell.abi_tag == "none":
        notes.append(PY3_NONE_NOTE.format(python=cell_targets(cell).python))
    return tuple(notes)


def _unquoted(source: str) -> str:
    """A string literal's source without its quotes (and an f-string's `f`)."""
    return (source[1:] if source[:2] in ('f"', "f'") else source).strip("\"'")


def arch_warnings(cell: Cell, read: tuple[Path, SetupPy] | None) -> list[str]:
    """Where the project file its backend names (`read`: `project_setup_py`) keeps the
    cell's targets from the build, what init says must change, in its words; and where its
    own nvcc arch flags differ from the cell's targets, that the first compile will stop
    the cell. Said before anything is provisioned or compiled."""
    hints = backend_for(cell.build.backend).arch_hints
    if read is None or hints is None:
        return []
    path, setup_py = read[0], as_built(read[1], dict(cell.build.env))
    if cell.build.targets_env:  # its own flags follow the variables that get the targets
        return [change.line() for change in arch_list_changes(setup_py)]
    takes = (hints.variable, hints.gencode_sits)
    warnings = [change.line() for change in torch_arch_changes(setup_py, takes)]
    literal = literal_flags(setup_py)
    if literal is not None:
        stop = literal_warning(str(path), literal, cell_request(cell.sms, cell.ptx), hints)
        warnings += [stop] if stop is not None else []
    if (own := targets_variable(setup_py)) is not None:
        warnings.append(
            f"{own.place}: the -gencode flags follow {own.name} (default {own.default}), which "
            f"the cell's sms do not reach: hand them to it in matrix.yaml with {own.matrix_key}"
        )
    return warnings


def literal_flags(setup_py: SetupPy) -> LiteralFlags | None:
    """The nvcc arch flags a setup.py spells out (as release.project.setuppy reads them:
    real flags only, never a comment or a docstring, nor one it computes: `sm_{num}` says
    no target until it runs), with the first line they are on."""
    spelled = [g for g in setup_py.gencode if g.cubins or g.ptx]
    if not spelled:
        return None
    return LiteralFlags(
        line=spelled[0].place.line or 0,
        flags=tuple(dict.fromkeys(_unquoted(g.text) for g in spelled)),
    )
