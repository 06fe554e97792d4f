"""What `release init` decides from a project's files (release.project) and, for a torch
project, the torch versions of its index: the backend, the GPU targets, the Python axis, the
torch pin and the force-CUDA switch, each with where it was read; what needs a change
before the project builds; and what could not be decided. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.backends.recipe import BackendName
from release.errors import ConfigError
from release.init.torchindex import TorchRelease, newest_allowed
from release.project import CMakeLists, Gencode, Place, PyProject, Reading, Said, SetupPy
from release.targets import CudaVersion, GpuTarget, target_problem

CUDA = CudaVersion(13, 0)  # the CUDA version whose whole toolchain comes from PyPI
DEFAULT_SMS = tuple(GpuTarget(n) for n in (75, 80, 86, 89, 90, 100))
DEFAULT_PTX = GpuTarget(100)
CPYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")  # offline: the Python list's range
CONTRACT_VARIABLE = "RELEASE_SMS"  # what a backend of csrc's contract reads (csrc/BUILDING.md)
_TORCH_ENTRY = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")


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
    """The torch versions an index has (`releases`), or why they are not known."""

    index_url: str
    releases: Mapping[Version, TorchRelease] | None
    failure: str | None = None


@dataclass(frozen=True, kw_only=True)
class Targets:
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None
    found: tuple[Finding, ...]
    changes: tuple[Note, ...]
    undecided: tuple[Note, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PythonAxis:
    abi3: str | None
    python: tuple[str, ...]
    found: Finding
    undecided: tuple[Note, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TorchPin:
    version: Version | None  # None: left a TODO
    pythons: tuple[str, ...]  # what that torch has wheels for
    found: Finding | None
    undecided: tuple[Note, ...] = ()


# - the backend -


def backend_of(read: Reading) -> tuple[BackendName, str]:
    """The backend that builds the project, and why; a ConfigError where none fits."""
    pyproject, setup_py, cmake = read.pyproject, read.setup_py, read.cmakelists
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
    if cmake is not None and cmake.cuda is not None:
        return "cmake", f"{cmake.cuda}: CMakeLists.txt enables CUDA"
    raise ConfigError(
        [
            f"{read.directory}: no build system release knows: no setup.py with torch's "
            "CUDAExtension, no scikit-build-core or CMakeLists.txt with CUDA, no in-tree "
            f"backend reading {CONTRACT_VARIABLE}"
        ],
        hint="run release init in the kernel project's directory, or write matrix.yaml by "
        "hand (the README's Releasing your project)",
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
    if backend == "torch" and read.setup_py is not None:
        return _torch_targets(read.setup_py)
    if backend == "cmake" and read.cmakelists is not None:
        return _cmake_targets(read.cmakelists)
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


def _torch_targets(setup_py: SetupPy) -> Targets:
    changes = [
        Note(
            place=str(d.place),
            text="sets TORCH_CUDA_ARCH_LIST over the one each cell passes: the matrix's sms "
            "never reach the build",
            fix='make it a default: os.environ.setdefault("TORCH_CUDA_ARCH_LIST", ...)',
        )
        for d in setup_py.arch_list
        if d.overrides
    ]
    if setup_py.gencode:
        return _gencode_targets(setup_py.gencode, "torch", changes)
    for default in setup_py.arch_list:
        parsed = parse_torch_arch_list(default.value) if default.value else None
        if parsed is not None:
            sms, ptx = parsed
            source = f"{default.place}: TORCH_CUDA_ARCH_LIST {default.value}"
            return _project_targets(sms, ptx, (default.place, source), "torch", changes)
    return _default_targets("the project names no SM list of its own", changes=changes)


def _cmake_targets(cmake: CMakeLists) -> Targets:
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
        return _gencode_targets(cmake.gencode, "cmake", changes)
    for found in cmake.architectures:
        parsed = parse_cmake_architectures(found.entries)
        if parsed is not None:
            sms, ptx = parsed
            source = f"{found.place}: CMAKE_CUDA_ARCHITECTURES {';'.join(found.entries)}"
            return _project_targets(sms, ptx, (found.place, source), "cmake", changes)
    return _default_targets("the project names no SM list of its own", changes=changes)


def _gencode_targets(
    flags: Sequence[Gencode], backend: BackendName, changes: list[Note]
) -> Targets:
    cubins = [GpuTarget.parse(sm) for flag in flags for sm in flag.cubins]
    ptx = [GpuTarget.parse(p) for flag in flags for p in flag.ptx]
    takes = "TORCH_CUDA_ARCH_LIST" if backend == "torch" else "CMAKE_CUDA_ARCHITECTURES"
    instead = "instead of" if backend == "torch" else "beside"
    changes.append(
        Note(
            place=str(flags[0].place),
            text=f"hard-codes nvcc's -gencode flags: the build compiles them {instead} the "
            f"{takes} each cell passes, so the matrix's sms do not decide the wheel's",
            fix=f"take them out, so that the matrix's sms reach the build as {takes}",
        )
    )
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
    backend: BackendName,
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
    if not kept:
        return _default_targets("none of the project's SMs builds with CUDA 13.0", changes=changes)
    highest = max(t.number for t in kept)
    chosen = None
    if ptx is not None:
        chosen = GpuTarget(max(ptx.number, highest))
        if backend == "torch" and chosen not in kept:
            chosen = None
    ptx_source = "the project's PTX" if chosen is not None else "the project builds no PTX"
    if ptx is not None and chosen is not None and chosen.number != ptx.number:
        ptx_source = f"the project's PTX {ptx.number}, raised to the highest SM"
    found = (
        Finding(key="sms", value=_listed(kept), source=source),
        Finding(key="ptx", value=str(chosen) if chosen else "none", source=ptx_source),
    )
    return Targets(
        sms=tuple(kept), ptx=chosen, found=found, changes=tuple(changes), undecided=tuple(undecided)
    )


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


# - the force-CUDA switch -


def force_cuda(
    setup_py: SetupPy | None,
) -> tuple[tuple[tuple[str, str], ...], list[Finding], list[Note]]:
    """build.env for each `torch.cuda.is_available()` gate a switch forces past, and a
    change for each gate nothing forces (a GPU-less build machine builds CPU-only)."""
    env: dict[str, str] = {}
    found: list[Finding] = []
    changes: list[Note] = []
    for gate in setup_py.gates if setup_py else ():
        if gate.forced_by:
            switch = gate.forced_by[0]
            env.setdefault(switch.name, switch.on)
            found.append(
                Finding(
                    key="build.env",
                    value=f"{switch.name}={switch.on}",
                    source=f"{gate.place}: CUDA is built when torch.cuda.is_available() or "
                    f"{switch.name}={switch.on}",
                )
            )
            continue
        changes.append(
            Note(
                place=str(gate.place),
                text="builds CUDA only when torch.cuda.is_available(): on a build machine "
                "without a GPU it builds the CPU extension alone (`release build` then fails "
                "the cell), and no environment variable forces it",
                fix="let one force it, e.g. `torch.cuda.is_available() or os.environ.get("
                '"FORCE_CUDA") == "1"`, then set build.env FORCE_CUDA: "1" in matrix.yaml',
            )
        )
    return tuple(sorted(env.items())), found, changes


# - the Python axis -


def python_axis(read: Reading, torch: TorchPin) -> PythonAxis:
    """abi3 and its floor for a py_limited_api project whose wheel is tagged abi3, else the
    CPython list."""
    setup_py = read.setup_py
    limited = setup_py.limited_api if setup_py else None
    floor = _abi3_floor(read)
    notes: list[Note] = []
    if limited is not None and limited.on is None:
        assigned = ", ".join(str(p) for p in limited.assigned) or str(limited.place)
        notes.append(
            Note(
                place=str(limited.place),
                text=f"py_limited_api is computed ({limited.expression}, set at {assigned}): "
                + ("matrix.yaml takes it as on" if floor else "matrix.yaml takes it as off"),
                fix="if the wheel's tags say otherwise, the build fails naming the key to "
                "change (abi3 or python)",
            )
        )
    if limited is not None and limited.on is not False and floor is not None:
        value, source, floor_notes = floor
        return PythonAxis(
            abi3=value,
            python=(),
            found=Finding(key="abi3", value=value, source=source),
            undecided=tuple(notes + floor_notes),
        )
    if limited is not None and limited.on:
        notes.append(
            Note(
                place=str(limited.place),
                text="the extension is py_limited_api, but nothing sets bdist_wheel's "
                "py_limited_api, so the wheel is tagged cp3X-cp3X: matrix.yaml lists Pythons",
                fix='for one abi3 wheel a cell: options={"bdist_wheel": {"py_limited_api": '
                '"cp310"}} in setup(), and abi3: "3.10" in matrix.yaml',
            )
        )
    pythons, source = _python_list(read, torch)
    return PythonAxis(
        abi3=None,
        python=pythons,
        found=Finding(key="python", value=" ".join(pythons), source=source),
        undecided=tuple(notes),
    )


def _abi3_floor(read: Reading) -> tuple[str, str, list[Note]] | None:
    """The abi3 floor ("3.9") and where it was read."""
    setup_py, setup_cfg = read.setup_py, read.setup_cfg
    tagged = [s for s in (setup_py.limited_api_floor if setup_py else None,
                          setup_cfg.limited_api_floor if setup_cfg else None) if s]  # fmt: skip
    for said in tagged:
        if said.value and re.fullmatch(r"cp3\d+", said.value):
            return (
                f"3.{said.value[3:]}",
                f"{said.place}: bdist_wheel's py_limited_api {said.value}",
                [],
            )
    if not tagged:
        return None
    computed = tagged[0]
    note = Note(
        place=str(computed.place),
        text=f"bdist_wheel's py_limited_api is computed ({computed.expression})",
        fix="check that the floor below is the one it gives",
    )
    define = setup_py.limited_api_define if setup_py else None
    if define is not None and define.value:
        hexversion = int(define.value, 16)
        value = f"{hexversion >> 24}.{(hexversion >> 16) & 0xFF}"
        return value, f"{define.place}: -DPy_LIMITED_API={define.value}", [note]
    requires = _requires_python_floor(read)
    if requires is not None:
        return requires[0], requires[1], [note]
    return None


def _requires_python_floor(read: Reading) -> tuple[str, str] | None:
    said: Said | None = read.pyproject.requires_python if read.pyproject else None
    if said is None and read.setup_cfg is not None:
        said = read.setup_cfg.python_requires
    if said is None or said.value is None:
        return None
    match = re.search(r">=\s*(3\.\d+)", said.value)
    return (match.group(1), f"{said.place}: requires-python {said.value}") if match else None


def _python_list(read: Reading, torch: TorchPin) -> tuple[tuple[str, ...], str]:
    classifiers = read.pyproject.pythons if read.pyproject else ()
    requires = _requires_python_floor(read)
    floor = int(requires[0].split(".")[1]) if requires else 0
    if classifiers:
        kept = tuple(p for p in classifiers if not torch.pythons or p in torch.pythons)
        if kept:
            return kept, "pyproject.toml's Python classifiers" + (
                f" that torch {torch.version} has wheels for" if torch.pythons else ""
            )
    candidates = torch.pythons or CPYTHONS
    kept = tuple(p for p in candidates if int(p.split(".")[1]) >= floor) or candidates
    where = f" from {requires[1]}" if requires else ""
    if torch.pythons:
        return kept, f"the CPythons torch {torch.version} has wheels for{where}"
    return kept, f"the CPythons {kept[0]} to {kept[-1]}{where} (no torch listing to narrow them)"


# - the torch pin -


def torch_pin(pyproject: PyProject | None, lookup: TorchLookup | None) -> TorchPin:
    """The exact torch the cells build against: the newest the index has that the build
    requirement allows; a TODO where the index was not asked or has none."""
    required = pyproject.requirement("torch") if pyproject else None
    specifier = required.requirement.specifier if required else SpecifierSet()
    place = str(required.place) if required else "pyproject.toml"
    wanted = f"{required.requirement} ({place})" if required else "no build requirement"
    todo = "write the exact torch version to build against on matrix.yaml's TODO line"
    if lookup is None or lookup.releases is None:
        why = lookup.failure if lookup is not None else "no index was asked"
        note = Note(place=place, text=f"no exact torch pinned: {why}", fix=todo)
        return TorchPin(version=None, pythons=(), found=None, undecided=(note,))
    chosen = newest_allowed(lookup.releases, specifier)
    if chosen is None:
        note = Note(place=place, text=f"no torch on {lookup.index_url} fits {wanted}", fix=todo)
        return TorchPin(version=None, pythons=(), found=None, undecided=(note,))
    return TorchPin(
        version=chosen.version,
        pythons=chosen.pythons,
        found=Finding(
            key="torch",
            value=str(chosen.version),
            source=f"the newest torch on {lookup.index_url} that {wanted} allows",
        ),
    )
