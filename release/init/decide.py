"""The matrix `release init` writes for a project: every value with where it was read, what
the project must change before it builds, and what could not be decided (release.init.detect
and release.init.torchaxes read each value). Where a script stages the published
distribution from a subdirectory, the matrix releases that one: `project:` names the
subdirectory and `build.prepare` runs the script. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from release.backends import backend_for
from release.backends.recipe import BackendName, PrepareSpec, TargetsFormat
from release.init.detect import Finding, Note, TorchLookup, targets_of
from release.init.native import Native, native_of
from release.init.torchaxes import force_build, force_cuda, python_axis, stable_abi, torch_pin
from release.project import Naming, Reading, Said, naming, reading
from release.project.layout import Layout
from release.project.native import NativeBuild
from release.project.places import lines_said
from release.project.staging import Staged
from release.targets import GpuTarget

# Per backend: the CPU arches a GitHub-hosted x86_64 runner builds, and the manylinux level
# its wheels get (csrc cross-compiles with zig against glibc 2.28; nvcc and g++ link against
# the runner's glibc, 2.34 or later).
ARCHES: dict[BackendName, tuple[str, ...]] = {
    "release": ("x86_64", "aarch64"),
    "cmake": ("x86_64",),
    "torch": ("x86_64",),
}
MANYLINUX: dict[BackendName, str] = {"release": "2_28", "cmake": "2_34", "torch": "2_34"}


@dataclass(frozen=True, kw_only=True)
class Decision:
    backend: BackendName
    name: str  # the project's name, or a description where it is computed
    arches: tuple[str, ...]
    manylinux: str
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None
    abi3: str | None = None
    python: tuple[str, ...] = ()
    torch: Version | None = None  # a torch project's pin; None: a TODO
    torch_index: str | None = None  # where that torch comes from, if not pip's index
    build_env: tuple[tuple[str, str], ...] = ()
    targets_env: tuple[tuple[str, TargetsFormat], ...] = ()  # the project's own targets variable
    project: str = "."  # the directory of the distribution released, from matrix.yaml's
    prepare: PrepareSpec | None = None  # the script that stages it
    device_code: str | None = None  # "none": no sms and ptx
    python_any: bool = False
    cuda_libraries: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # build.requires
    config_settings: tuple[tuple[str, str], ...] = ()  # build.config-settings
    found: tuple[Finding, ...] = ()
    changes: tuple[Note, ...] = ()
    undecided: tuple[Note, ...] = ()


def decide(
    read: Reading,
    backend: tuple[BackendName, str],
    lookup: TorchLookup | None,
    *,
    torch_index: str | None = None,
    layout: Layout | None = None,
) -> Decision:
    """The matrix for the project `read` describes (`layout`: what else init read of its
    repository), built by `backend` (name, why)."""
    name, source = backend
    layout = layout or Layout(native=NativeBuild())
    staged = layout.staged
    named = _staged_naming(layout) if staged is not None else naming(read)
    found = [Finding(key="backend", value=name, source=source)]
    found += _staged_findings(read, layout) + _naming_findings(named)
    undecided = _naming_notes(named) + _staged_notes(staged)
    native = native_of(read, layout, name)
    targets = targets_of(read, name)
    if native.device_code is None:
        found += targets.found
    found += native.found
    changes = [*targets.changes, *native.changes]
    switch = read.cmakelists.cuda_switch if read.cmakelists is not None else None
    if name == "cmake" and switch is not None and read.cmakelists is not None:
        via = f" (through {switch.via})" if switch.via else ""
        found.append(
            Finding(
                key="build.config-settings",
                value=f"{switch.define}={switch.value}",
                source=f"{read.cmakelists.cuda}: CUDA is enabled only where {switch.name} is "
                f"{switch.value}{via}, and its default is {switch.default or '(empty)'} "
                f"({switch.declared})",
            )
        )
    skipped = read.pyproject.cmake_off if read.pyproject is not None else None
    if name == "cmake" and skipped is not None:
        changes.append(
            Note(
                place=str(skipped),
                text="[tool.scikit-build] wheel.cmake = false: the PEP 517 build packages what "
                "the tree already holds and never runs CMake, so a cell compiles nothing and "
                "its wheel fails the inspection (no device code)",
                fix="build the library first in build.prepare (the script the project's own "
                "CI runs before its wheel build), or let scikit-build-core run CMake",
            )
        )
    undecided += targets.undecided
    decision = Decision(
        backend=name,
        name=named.name.value if named.name and named.name.value else "this project",
        arches=ARCHES[name],
        manylinux=MANYLINUX[name],
        sms=targets.sms,
        ptx=targets.ptx,
        project=staged.directory if staged is not None else ".",
        prepare=_prepare(staged),
        device_code=native.device_code,
        cuda_libraries=native.cuda_libraries,
        requires=native.requires,
        config_settings=((switch.define, switch.value),) if name == "cmake" and switch else (),
        build_env=native.build_env,
        targets_env=targets.targets_env if native.device_code is None else (),
    )
    if name == "cmake" and (read.cmakelists is None or read.cmakelists.cuda is None):
        undecided.append(
            Note(
                place="CMakeLists.txt",
                text="no project(... CUDA) or enable_language(CUDA) was found: the cmake "
                "backend drives nvcc, which a project without CUDA never calls",
            )
        )
    if not backend_for(name).torch_axes:
        return replace(
            decision, found=tuple(found), changes=collapsed(changes), undecided=collapsed(undecided)
        )
    return _torch_decision(
        read, lookup, decision, native, torch_index=torch_index, notes=(found, changes, undecided)
    )


def _torch_decision(
    read: Reading,
    lookup: TorchLookup | None,
    decision: Decision,
    native: Native,
    *,
    torch_index: str | None,
    notes: tuple[list[Finding], list[Note], list[Note]],
) -> Decision:
    found, changes, undecided = notes
    pyproject = read.pyproject
    pin = torch_pin(pyproject, lookup, native.standard, read.setup_py)
    axis = python_axis(read, pin)
    cuda, build = force_cuda(read.setup_py), force_build(read.setup_py)
    off = dict(decision.build_env)  # a local-version switch stays off, whatever else it does
    forced, builds = build.env, list(build.found)
    if any(name not in off for name, _ in forced):
        forced = tuple(item for item in forced if item[0] not in off)
        builds = [f for f in builds if f.value.split("=")[0] not in off]
    abi, crossed = stable_abi(read.setup_py)
    found += [*([pin.found] if pin.found else []), *cuda.found, *builds, *abi]
    if not native.python_any:
        found.append(axis.found)
    changes += [*cuda.changes, *build.changes, *crossed]
    undecided += [*pin.undecided, *([] if native.python_any else axis.undecided)]
    undecided += [*cuda.undecided, *build.undecided]
    return replace(
        decision,
        abi3=None if native.python_any else axis.abi3,
        python=() if native.python_any else axis.python,
        python_any=native.python_any,
        torch=pin.version,
        torch_index=torch_index,
        build_env=tuple(
            sorted({**dict(cuda.env), **dict(forced), **dict(decision.build_env)}.items())
        ),
        found=tuple(found),
        changes=collapsed(changes),
        undecided=collapsed(undecided),
    )


def collapsed(notes: Sequence[Note]) -> tuple[Note, ...]:
    """`notes`, each that a file says again at other lines (the same text and fix) said
    once, where it is first, with how many places and their first lines: 6,000 repeated
    `set(CMAKE_CUDA_ARCHITECTURES 80)` made 6,000 notes and a matrix.yaml past its bound."""
    alike: dict[tuple[str, str, str], list[Note]] = {}
    for note in notes:
        file, _, line = note.place.rpartition(":")
        if not line.isdigit():
            file = note.place
        alike.setdefault((file, note.text, note.fix), []).append(note)
    said = []
    for (file, text, fix), group in alike.items():
        if len(group) == 1:
            said.append(group[0])
            continue
        lines = [int(n.place.rpartition(":")[2]) for n in group if n.place != file]
        where = f": {lines_said(lines)}" if lines else ""
        said.append(replace(group[0], text=f"{text} ({len(group):,} places{where})", fix=fix))
    return tuple(said)


def _prepare(staged: Staged | None) -> PrepareSpec | None:
    if staged is None:
        return None
    return PrepareSpec(
        command=staged.command, version_file=staged.version_file, output=staged.output
    )


def _staged_naming(layout: Layout) -> Naming:
    """The staged distribution's name and version (its version file's, where its files
    compute it), with places under the root."""
    staged, files = layout.staged, layout.staged_files
    if staged is None or files is None:
        return Naming(name=None, version=None)
    named = naming(reading(files), layout.version)

    def under(said: Said | None) -> Said | None:
        if said is None:
            return None
        where = replace(said.place, file=f"{staged.directory}/{said.place.file}")
        return replace(said, place=where, via=None)

    return Naming(name=under(named.name), version=under(named.version), problem=named.problem)


def _staged_findings(read: Reading, layout: Layout) -> list[Finding]:
    staged = layout.staged
    if staged is None:
        return []
    root = naming(read).name
    instead = f", not the root's {root.value} ({root.source()})" if root and root.value else ""
    out = [
        Finding(
            key="project",
            value=staged.directory,
            source=f"{staged.copies}: copies {staged.directory}/pyproject.toml to stage it: "
            f"{staged.name.value} is the distribution published{instead}",
        ),
        Finding(
            key="build.prepare",
            value=staged.command,
            source=f"{staged.copies}: {staged.script} stages {staged.output or '?'}/, which the "
            "PEP 517 build then builds",
        ),
    ]
    if staged.version_file is not None:
        source = staged.version_from
        how = (
            f"{staged.directory}/{source.place}: its version is the staged {source.value}, "
            if source is not None
            else ""
        )
        out.append(
            Finding(
                key="build.prepare.version-file",
                value=staged.version_file,
                source=f"{how}which {staged.script} writes from {staged.version_file}: the "
                "release workflow writes the tag's version there, and each cell's prepare "
                "step its own",
            )
        )
    return out


def _staged_notes(staged: Staged | None) -> list[Note]:
    """What to check of the staging script under `release build`."""
    notes = []
    if staged is not None and staged.output is None:
        unfit = staged.output_unfit
        notes.append(
            Note(
                place=str(staged.copies),
                text=f"where {staged.script} stages {staged.directory}/pyproject.toml to is "
                + (f"not a place release can empty and remove: {unfit}" if unfit else "computed"),
                fix=(
                    "stage into a directory of the checkout of its own and write it as "
                    "build.prepare's output in matrix.yaml"
                    if unfit
                    else "write that directory as build.prepare's output in matrix.yaml"
                ),
            )
        )
    if staged is not None and staged.version_file is None:
        notes.append(
            Note(
                place=str(staged.copies),
                text=f"no file {staged.script} reads {staged.name.value}'s version from was found",
                fix="write it as build.prepare's version-file in matrix.yaml",
            )
        )
    own = [p for p in (staged.installs, staged.builds) if p is not None] if staged else []
    if staged is not None and own:
        lines = " and ".join(str(p) for p in own)
        notes.append(
            Note(
                place=lines,
                text=f"{staged.script} installs into the Python it runs with and builds a "
                "wheel of its own: under `release build` the step runs in the cell's build "
                "environment (a torch cell's pinned torch venv), and release builds the "
                "staged directory itself",
                fix=f"end {staged.script} after staging when RELEASE_PREPARE is set, e.g. "
                f'`[[ -n "${{RELEASE_PREPARE:-}}" ]] && exit 0` before line {own[0].line}',
            )
        )
    return notes


def _naming_findings(named: Naming) -> list[Finding]:
    """The name and version read, each where it is a name or a version (a version file
    that holds anything else is the naming's problem, and its text is written nowhere)."""
    out: list[Finding] = []
    if named.problem is not None:
        return out
    for key, said in (("name", named.name), ("version", named.version)):
        if said is not None and said.value is not None:
            out.append(Finding(key=key, value=said.value, source=said.source()))
    return out


def _naming_notes(named: Naming) -> list[Note]:
    notes = []
    if named.problem is not None:
        notes.append(Note(place="", text=named.problem))
    for key, said in named.computed():
        where = str(said.place) if said is not None else ""
        how = f"is computed ({said.expression})" if said is not None else "is named by no file"
        notes.append(
            Note(
                place=where,
                text=f"the {key} {how}: each command asks the build backend for it (and says "
                "what that installs first), once per commit",
                fix=f"write the {key} as a literal to read it without the backend",
            )
        )
    return notes
