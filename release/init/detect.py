"""What `release init` reads from a project's files (release.project): the backend and the
GPU targets, each with where it was read, what needs a change before the project builds,
and what could not be decided; and the records those take (`Finding`, `Note`). What its
native code is is release.init.native's, a torch project's own axes
release.init.torchaxes'. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from release.backends import backend_for
from release.backends.archflags import ArchHints
from release.backends.base import Backend
from release.backends.recipe import BackendName, TargetsFormat
from release.errors import ConfigError, shown
from release.init.torchindex import TorchRelease
from release.inspection.torchcuda import IndexTorches
from release.project import CMakeLists, Gencode, Place, PyProject, Reading, SetupPy, naming
from release.project.archchanges import arch_list_changes, flags_from_arch_list, gencode_change
from release.project.layout import Layout
from release.project.native import TORCH_LIBRARIES
from release.project.places import ProjectChange
from release.project.setuppy import as_built
from release.project.targetsenv import targets_variable
from release.targets import CudaVersion, GpuTarget, target_problem

CUDA = CudaVersion(13, 0)  # the CUDA version whose whole toolchain comes from PyPI
DEFAULT_SMS = tuple(GpuTarget(n) for n in (75, 80, 86, 89, 90, 100))
DEFAULT_PTX = GpuTarget(100)
CONTRACT_VARIABLE = "RELEASE_SMS"  # what a backend of csrc's contract reads (csrc/BUILDING.md)
TORCH_MODULES = frozenset({"torch", "torchvision", "torchaudio"})  # the torch backend's own
_TORCH_ENTRY = re.compile(r"^(\d{1,2})\.(\d)([af]?)(\+PTX)?$")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One value matrix.yaml takes from the project, and where it was read."""

    key: str
    value: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Note:
    """Something init reports at a place of the project: a change the project needs before
    it builds (with its fix), or something it could not decide."""

    place: str
    text: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class TorchLookup:
    """The torch versions an index has (`releases`), or why they are not known; for a
    stable-ABI project also the CUDA each is built for from its target on (`built_for`), or
    why that is not known (`built_for_failure`)."""

    index_url: str
    releases: Mapping[Version, TorchRelease] | None
    failure: str | None = None
    built_for: IndexTorches | None = None
    built_for_failure: str | None = None
    # releases taken out of `releases`, each with why: its own requirements exclude one of
    # the project's build requirements, which its build environment installs beside it
    left_out: tuple[tuple[Version, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Targets:
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None
    found: tuple[Finding, ...]
    changes: tuple[Note, ...]
    undecided: tuple[Note, ...] = ()
    targets_env: tuple[tuple[str, TargetsFormat], ...] = ()


# - the backend -


def requires_python_problem(read: Reading) -> str | None:
    """Why pyproject.toml's requires-python (or setup.cfg's python_requires), which init
    reads the Python axis from, is no PEP 440 specifier set, at its line; None where it is
    one or is not there."""
    for said, key in (
        (read.pyproject.requires_python if read.pyproject else None, "requires-python"),
        (read.setup_cfg.python_requires if read.setup_cfg else None, "python_requires"),
    ):
        if said is None:
            continue
        try:
            SpecifierSet(said.value or "")
            if said.value and any(not char.isprintable() for char in said.value):
                raise InvalidSpecifier(said.value)  # a line break packaging strips away
        except InvalidSpecifier:
            said_as = shown(said.value) if said.value is not None else said.expression
            return (
                f"{said.place.at(read.directory)}: {key} {said_as} is not a PEP 440 version "
                'specifier (e.g. ">=3.10")'
            )
        if said.value is None:
            return f"{said.place.at(read.directory)}: {key} is {said.expression}, not a string"
    return None


def backend_of(read: Reading, layout: Layout | None = None) -> tuple[BackendName, str]:
    """The backend that builds the project, and why; a ConfigError where none fits, or
    where a build file says something the matrix loader would refuse (at its line). A
    CMakeLists.txt whose own first lines say an IDE alone reads it is not the build where
    setup.py or pyproject.toml is the PEP 517 entry point."""
    pyproject, setup_py, cmake = read.pyproject, read.setup_py, read.cmakelists
    if pyproject is not None or setup_py is not None or read.setup_cfg is not None:
        problem = naming(read).problem or requires_python_problem(read)
        if problem is not None:
            raise ConfigError([problem], hint="fix the project file at that line")
    in_tree = pyproject.build_backend if pyproject is not None else None
    if in_tree is not None and CONTRACT_VARIABLE in (read.backend_source or ""):
        return "release", (
            f"{in_tree.place}: the in-tree backend {in_tree.value} reads {CONTRACT_VARIABLE} "
            "(csrc/BUILDING.md's contract)"
        )
    if setup_py is not None and setup_py.cuda_extension is not None:
        return "torch", f"{setup_py.cuda_extension}: uses torch's CUDAExtension"
    skbuild = _scikit_build(pyproject)
    if skbuild is not None:
        return "cmake", skbuild
    entry = pyproject is not None or setup_py is not None
    ide_only = cmake.ide_only if cmake is not None and entry else None
    if cmake is not None and cmake.cuda is not None and ide_only is None:
        return "cmake", f"{cmake.cuda}: CMakeLists.txt enables CUDA"
    torch = layout.native.linked(TORCH_LIBRARIES) if layout is not None else []
    if torch:
        aside = f" ({ide_only.place} is for an IDE only: {ide_only.value})" if ide_only else ""
        return "torch", (
            f"{torch[0].place}: links libtorch (-l{torch[0].value}): its cells build beside an "
            f"exact torch{aside}"
        )
    raise _no_backend(read, layout)


def _no_backend(read: Reading, layout: Layout | None) -> ConfigError:
    above = layout.staged_above if layout is not None else None
    if above is not None:
        top = read.directory.parents[len(above.directory.split("/")) - 1]
        return ConfigError(
            [
                f"{read.directory}: {above.name.value} is the distribution {above.script} "
                f"stages from this directory ({above.copies}), with the rest of {top}"
            ],
            hint=f"run release init {top}: it writes project: {above.directory} and "
            f"build.prepare for {above.script}",
        )
    in_tree = read.pyproject.build_backend if read.pyproject is not None else None
    if in_tree is not None and read.pyproject is not None and read.pyproject.backend_path:
        return ConfigError(
            [
                f"{read.directory / str(in_tree.place)}: the build backend "
                f"{shown(in_tree.value or '')} is the "
                f"project's own (backend-path), and it reads no {CONTRACT_VARIABLE}: release "
                "cannot hand it a cell's GPU targets (no setup.py with torch's CUDAExtension, "
                "no scikit-build-core or CMakeLists.txt with CUDA either)"
            ],
            hint=f"make the backend read {CONTRACT_VARIABLE} and RELEASE_PTX (the `release` "
            "backend's contract: docs/backends.md), or write matrix.yaml by hand (docs/matrix.md)",
        )
    return ConfigError(
        [
            f"{read.directory}: no build system release knows: no setup.py with torch's "
            "CUDAExtension or linking libtorch, no scikit-build-core or CMakeLists.txt with "
            f"CUDA, no in-tree backend reading {CONTRACT_VARIABLE}"
        ],
        hint="run release init in the kernel project's directory, or write matrix.yaml by "
        "hand (docs/matrix.md)",
    )


def _scikit_build(pyproject: PyProject | None) -> str | None:
    if pyproject is None:
        return None
    backend = pyproject.build_backend
    if backend is not None and (backend.value or "").startswith("scikit_build_core"):
        return f"{backend.place}: builds with scikit-build-core"
    required = pyproject.requirement("scikit-build-core")
    return f"{required.place}: requires scikit-build-core" if required else None


# - GPU targets -


def targets_of(read: Reading, backend: BackendName) -> Targets:
    """The SMs and PTX: the project's own list where it has one, else the tool's default;
    what would keep the matrix's list from reaching the build needs a change."""
    builder = backend_for(backend)
    hints = builder.arch_hints
    if hints is not None and hints.arch_file == "setup.py" and read.setup_py is not None:
        return _torch_targets(read.setup_py, builder, hints)
    if hints is not None and hints.arch_file == "CMakeLists.txt" and read.cmakelists is not None:
        return _cmake_targets(read.cmakelists, builder, hints)
    return _default_targets("the project names no SM list of its own")


def _default_targets(why: str, *, changes: Sequence[Note] = ()) -> Targets:
    return Targets(
        sms=DEFAULT_SMS,
        ptx=DEFAULT_PTX,
        found=(
            Finding(key="sms", value=_listed(DEFAULT_SMS), source=f"the tool's default ({why})"),
            Finding(key="ptx", value=str(DEFAULT_PTX), source="the highest SM"),
        ),
        changes=tuple(changes),
    )


def _torch_targets(setup_py: SetupPy, backend: Backend, hints: ArchHints) -> Targets:
    setup_py = as_built(setup_py)  # the flags of a branch left off decide no target
    changes = [note_of(c) for c in arch_list_changes(setup_py)]
    if (own := targets_variable(setup_py)) is not None:  # flags made from the cell's sms
        made = _project_targets(own.sms, own.ptx, (own.place, own.source), backend, changes)
        said = Finding(key="build.targets-env", value=f"{own.name}: sms", source=own.source)
        return replace(made, found=(*made.found, said), targets_env=((own.name, "sms"),))
    if (follows := flags_from_arch_list(setup_py)) is not None:
        made = _default_targets("its -gencode flags follow TORCH_CUDA_ARCH_LIST", changes=changes)
        return replace(made, undecided=(note_of(follows),))
    if setup_py.gencode:
        return _gencode_targets(setup_py.gencode, backend, hints, changes)
    for default in setup_py.arch_list:
        if default.fails:  # a "not implemented" branch's list builds nothing
            continue
        parsed = parse_torch_arch_list(default.value) if default.value else None
        if parsed is not None:
            sms, ptx = parsed
            source = f"{default.place}: TORCH_CUDA_ARCH_LIST {default.value}"
            return _project_targets(sms, ptx, (default.place, source), backend, changes)
    return _default_targets("the project names no SM list of its own", changes=changes)


def note_of(change: ProjectChange) -> Note:
    """A project's change as init reports it."""
    return Note(place=str(change.place), text=change.text, fix=change.fix)


def _cmake_targets(cmake: CMakeLists, backend: Backend, hints: ArchHints) -> Targets:
    changes = [
        Note(
            place=str(s.place),
            text="sets CMAKE_CUDA_ARCHITECTURES over the -DCMAKE_CUDA_ARCHITECTURES each "
            "cell passes: the matrix's sms never reach the build",
            fix="guard it: if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES) ... endif()",
        )
        for s in cmake.architectures
        if s.overrides
    ]
    changes += [
        Note(
            place=str(place),
            text="sets a target's CUDA_ARCHITECTURES, which replaces CMAKE_CUDA_ARCHITECTURES "
            "for it: the matrix's sms never reach that target",
            fix="drop the property; CMAKE_CUDA_ARCHITECTURES initialises every target's",
        )
        for place in cmake.target_architectures
    ]
    if cmake.gencode:
        return _gencode_targets(cmake.gencode, backend, hints, changes)
    for found in cmake.architectures:
        parsed = parse_cmake_architectures(found.entries)
        if parsed is not None:
            sms, ptx = parsed
            source = f"{found.place}: CMAKE_CUDA_ARCHITECTURES {';'.join(found.entries)}"
            return _project_targets(sms, ptx, (found.place, source), backend, changes)
    return _default_targets("the project names no SM list of its own", changes=changes)


def _gencode_targets(
    flags: Sequence[Gencode], backend: Backend, hints: ArchHints, changes: list[Note]
) -> Targets:
    changes.append(note_of(gencode_change(flags, (hints.variable, hints.gencode_sits))))
    try:
        cubins = [GpuTarget.parse(sm) for flag in flags for sm in flag.cubins]
        ptx = [GpuTarget.parse(p) for flag in flags for p in flag.ptx]
    except ValueError as error:  # sm_1000, sm_5: the flags name no target nvcc builds
        return _default_targets(f"the -gencode flags do not read: {error}", changes=changes)
    if not cubins:
        return _default_targets("the -gencode flags are computed", changes=changes)
    highest_ptx = max(ptx, default=None)
    return _project_targets(
        tuple(dict.fromkeys(cubins)),
        GpuTarget(highest_ptx.number) if highest_ptx else None,
        (flags[0].place, f"{flags[0].place}: the -gencode flags"),
        backend,
        changes,
    )


def _project_targets(
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
    read_at: tuple[Place, str],
    backend: Backend,
    changes: list[Note],
) -> Targets:
    """The project's own targets (read at a place, said as a source), less those CUDA 13.0
    cannot build; PTX raised to the highest SM (the matrix's rule), and for torch riding on
    one of the SMs."""
    place, source = read_at
    undecided = []
    kept = []
    for target in sorted(dict.fromkeys(sms)):
        problem = target_problem(target, CUDA)
        if problem is None:
            kept.append(target)
        else:
            undecided.append(Note(place=str(place), text=f"left out: {problem}"))
    for family in [t for t in kept if t.suffix == "f"]:
        if GpuTarget(family.number) in kept:  # one nvcc compile cannot build both
            kept.remove(GpuTarget(family.number))
            text = (
                f"left out: sm_{family.number} beside {family.sm}, which runs on every GPU "
                "of that family (one nvcc compile cannot build both)"
            )
            undecided.append(Note(place=str(place), text=text))
    if not kept:
        return _default_targets("none of the project's SMs builds with CUDA 13.0", changes=changes)
    chosen, ptx_source = _ptx(kept, ptx, backend)
    found = (
        Finding(key="sms", value=_listed(kept), source=source),
        Finding(key="ptx", value=str(chosen) if chosen else "none", source=ptx_source),
    )
    return Targets(
        sms=tuple(kept), ptx=chosen, found=found, changes=tuple(changes), undecided=tuple(undecided)
    )


def _ptx(
    kept: Sequence[GpuTarget], ptx: GpuTarget | None, backend: Backend
) -> tuple[GpuTarget | None, str]:
    """The project's PTX target, raised to the highest SM (the matrix's rule); for torch it
    rides on an SM it also builds (TORCH_CUDA_ARCH_LIST's `+PTX`)."""
    if ptx is None:
        return None, "the project builds no PTX"
    chosen = GpuTarget(max(ptx.number, *(t.number for t in kept)))
    if backend.ptx_beside_cubin and chosen not in kept:
        return None, f"none: torch adds PTX to an SM it builds, and {chosen.number} is not one"
    if chosen.number != ptx.number:
        return chosen, f"the project's PTX {ptx.number}, raised to the highest SM"
    return chosen, "the project's PTX"


def parse_torch_arch_list(text: str) -> tuple[tuple[GpuTarget, ...], GpuTarget | None] | None:
    """`7.5;8.0;9.0a;10.0+PTX` as (SMs, PTX); None where an entry is not a number
    (`Ampere`, a variable)."""
    sms: list[GpuTarget] = []
    ptx: GpuTarget | None = None
    for entry in re.split(r"[;\s]+", text.strip()):
        match = _TORCH_ENTRY.match(entry)
        if match is None:
            return None
        target = GpuTarget(int(match.group(1)) * 10 + int(match.group(2)), match.group(3))
        sms.append(target)
        if match.group(4):
            ptx = GpuTarget(target.number)
    return (tuple(sms), ptx) if sms else None


def parse_cmake_architectures(
    entries: Sequence[str],
) -> tuple[tuple[GpuTarget, ...], GpuTarget | None] | None:
    """CMake's `75-real;80;90a-real;100-virtual` as (SMs, PTX: the highest virtual one);
    None for `all`, `native`, a variable."""
    sms: list[GpuTarget] = []
    ptx: list[int] = []
    for entry in entries:
        number, _, kind = entry.partition("-")
        try:
            target = GpuTarget.parse(number)
        except ValueError:
            return None
        if kind in ("", "real"):
            sms.append(target)
        if kind in ("", "virtual"):
            ptx.append(target.number)
        if kind not in ("", "real", "virtual"):
            return None
    if not sms:
        return None
    return tuple(sms), (GpuTarget(max(ptx)) if ptx else None)


def _listed(targets: Sequence[GpuTarget]) -> str:
    return " ".join(str(t) for t in targets)
