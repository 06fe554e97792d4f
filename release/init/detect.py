"""What `release init` reads from a project's files (release.project): the backend and the
GPU targets, each with where it was read, what needs a change before the project builds,
and what could not be decided; what its native code is (`native_of`: a JIT-first project's
`device-code: none`, `python: any` for an extension without Python C-API, the CUDA
libraries it links, its C++ standard, a local-version switch on by default); and the
records those take (`Finding`, `Note`). A torch project's own axes are
release.init.torchaxes'. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.requirements import InvalidRequirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from release import pep508
from release.backends import backend_for
from release.backends.archflags import ArchHints
from release.backends.base import Backend
from release.backends.recipe import BackendName, TargetsFormat
from release.errors import ConfigError, shown
from release.init.torchindex import TorchRelease
from release.inspection.torchcuda import IndexTorches
from release.project import CMakeLists, Gencode, Place, PyProject, Reading, Said, SetupPy, naming
from release.project.archchanges import arch_list_changes, flags_from_arch_list, gencode_change
from release.project.layout import Layout
from release.project.native import CUDA_LIBRARIES, TORCH_LIBRARIES, python_binding
from release.project.places import ProjectChange
from release.project.pyproject import read_pyproject
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


# - native code -


@dataclass(frozen=True, kw_only=True)
class Native:
    """What init decides from the project's native code (each with its finding)."""

    device_code: str | None = None  # "none": a JIT-first project
    python_any: bool = False  # one py3-none wheel a cell: no Python C-API
    cuda_libraries: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # build requirements its build imports
    standard: Said | None = None  # the C++ standard its flags give (a year)
    build_env: tuple[tuple[str, str], ...] = ()
    found: tuple[Finding, ...] = ()
    changes: tuple[Note, ...] = ()  # what the project must change for what init decided


def native_of(read: Reading, layout: Layout, backend: BackendName) -> Native:
    """A JIT-first project (an extension whose translation units hold no .cu file and that
    links NVRTC or ships CUDA headers as package data) has `device-code: none`; a torch
    extension whose units bind to no Python C-API builds `python: any`; the CUDA libraries
    it links are build.cuda-libraries; a local-version switch on by default is set off."""
    found: list[Finding] = []
    units = [u.value for u in layout.native.units if u.value]
    # every source the build names is known (no f-string or glob names one), none is a .cu
    known = not layout.native.computed_units
    host_only = known and bool(units) and not any(u.endswith(".cu") for u in units)
    jit = _jit_first(layout, host_only)
    if jit is not None:
        found.append(Finding(key="device-code", value="none", source=jit))
    python_any = backend == "torch" and host_only and _no_python_api(layout, units)
    changes = _python_headers(layout) if python_any else []
    if python_any:
        found.append(_python_any(units, headers_bind=bool(changes)))
    libraries = _cuda_libraries(read, layout)
    if libraries:
        first = libraries[0]
        flags = ", ".join(
            f"-l{s.value}" if s.place.file != "CMakeLists.txt" else f"CUDA::{s.value}"
            for s in libraries
        )
        found.append(
            Finding(
                key="build.cuda-libraries",
                value=" ".join(s.value or "" for s in libraries),
                source=f"{first.place}: {flags}: the toolchain's CUDA_HOME gets each, with "
                "its headers and link, from PyPI's wheels of the cell's CUDA",
            )
        )
    requires = _build_requires(read, layout)
    found += [
        Finding(
            key="build.requires",
            value=needed.value or "",
            source=f"{module.place}: the build imports {module.value}, which {needed.value} "
            f"({needed.place}) provides as a dependency and no build requirement names",
        )
        for module, needed in requires
    ]
    switch = layout.local_version.switch
    env: tuple[tuple[str, str], ...] = ()
    if switch is not None:
        env = ((switch.name, switch.off),)
        found.append(
            Finding(
                key="build.env",
                value=f"{switch.name}={switch.off}",
                source=f"{switch.place}: {switch.name} defaults to {switch.default}, and "
                f"{switch.function}() then adds a local label ({switch.label}) to the version: "
                "a release's version has none",
            )
        )
    changes += _local_label_changes(layout)
    return Native(
        device_code="none" if jit is not None else None,
        python_any=python_any,
        cuda_libraries=tuple(s.value or "" for s in libraries),
        requires=tuple(needed.value or "" for _, needed in requires),
        standard=layout.native.standard,
        build_env=env,
        found=tuple(found),
        changes=tuple(changes),
    )


def _local_label_changes(layout: Layout) -> list[Note]:
    """The change a version that always gets a local label needs (none where it has none)."""
    label = layout.local_version.label
    return [] if label is None else [Note(place=str(label.label), text=label.text, fix=label.fix)]


def _python_headers(layout: Layout) -> list[Note]:
    """A change for each of the project's own headers, reached from its units, that binds to
    Python (a Python.h, pybind11 or torch/python.h include): it brings the Python C-API into
    the library that a py3-none wheel may not hold, whatever of it the code uses (every
    inline function of those headers the library keeps names the interpreter's symbols)."""
    included_by = {path: by for path, _, by in layout.headers}
    notes = []
    for path, text, _ in layout.headers:
        said = python_binding(text, path)
        if said is None:
            continue
        chain, at = [], path
        while at in included_by:
            at = included_by[at]
            chain.append(at)
        route = " through ".join(
            [chain[-1], ", ".join(chain[-2::-1])] if len(chain) > 1 else [chain[-1]]
        )
        notes.append(
            Note(
                place=str(said.place),
                text=f"includes {said.value}, reached from {route}: it brings the Python C-API "
                "into the library, which a py3-none wheel (python: any) may not use, and the "
                "build's inspection refuses the wheel",
                fix="drop the include where the file uses nothing of it, or build one wheel per "
                'Python instead (python: ["3.X", ...] in matrix.yaml)',
            )
        )
    return notes


def _jit_first(layout: Layout, host_only: bool) -> str | None:
    """Why the project's wheel holds no device code, or None."""
    if not host_only:
        return None
    nvrtc = layout.native.linked({"nvrtc"})
    why = [f"links NVRTC ({nvrtc[0].place}: -lnvrtc)"] if nvrtc else []
    if layout.cuda_headers:
        header = layout.cuda_headers[0]
        why.append(f"ships CUDA headers as package data ({header.place}: {header.value})")
    if not why:
        return None
    named = ", ".join(u.value or "" for u in layout.native.units)
    return (
        f"{layout.native.units[0].place}: its extension compiles {named}, no .cu file, and "
        f"{' and '.join(why)}: it compiles its kernels at run time"
    )


def _no_python_api(layout: Layout, units: Sequence[str]) -> bool:
    """Whether every named translation unit was read and none binds to Python itself (the
    headers they include are `_python_headers`' part)."""
    texts = dict(layout.units)
    if any(u not in texts for u in units):
        return False
    return not any(python_binding(texts[u], u) is not None for u in units)


def _python_any(units: Sequence[str], headers_bind: bool) -> Finding:
    """python: any, and why: the units bind to no Python C-API; where a header they include
    does, the value stands once that change is made (init lists it under "needs a change")."""
    unless = (
        ", once the headers they include bind to none either (needs a change)"
        if headers_bind
        else ""
    )
    return Finding(
        key="python",
        value="any",
        source=f"{', '.join(units)}: no Python C-API (no Python.h, pybind11, nanobind, "
        "torch/extension.h or torch/python.h, no module init or TORCH_LIBRARY): one "
        f"py3-none wheel a cell, built with one CPython{unless}",
    )


def _cuda_libraries(read: Reading, layout: Layout) -> list[Said]:
    """The CUDA libraries the build links: setup.py's and the staging script's `-l` flags
    and `libraries=`, a CMakeLists.txt's CUDA:: targets (not an IDE-only one's)."""
    found = layout.native.linked(CUDA_LIBRARIES)
    cmake = read.cmakelists
    if cmake is not None and cmake.ide_only is None:
        named = {s.value for s in found}
        found += [s for s in cmake.cuda_libraries if s.value in CUDA_LIBRARIES - named]
    return found


def _build_requires(read: Reading, layout: Layout) -> list[tuple[Said, Said]]:
    """(import, requirement) for each module the build's Python imports (setup.py, the
    staging script) that a runtime dependency of the project provides (`tvm_ffi` from
    `apache-tvm-ffi`) and that its build-system requires leave out; torch is the torch
    backend's own."""
    staged = layout.staged_files.text("pyproject.toml") if layout.staged_files else None
    pyprojects = [p for p in (read.pyproject, read_pyproject(staged) if staged else None) if p]
    dependencies = [*layout.native.requirements, *(d for p in pyprojects for d in p.dependencies)]
    declared = {canonicalize_name(r.requirement.name) for p in pyprojects for r in p.requires}
    out: dict[str, tuple[Said, Said]] = {}
    for module in layout.native.imports:
        name = module.value or ""
        if name in TORCH_MODULES or name in out:
            continue
        for said in dependencies:
            try:
                requirement = pep508.requirement(said.value or "")
            except InvalidRequirement:
                continue
            canonical = canonicalize_name(requirement.name)
            provides = canonical.replace("-", "_")
            if canonical not in declared and (provides == name or provides.endswith(f"_{name}")):
                out[name] = (module, said)
                break
    return list(out.values())
