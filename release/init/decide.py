"""The matrix `release init` writes for a project: every value with where it was read, what
the project must change before it builds, and what could not be decided (release.init.detect
and release.init.torchaxes read each value). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import Version

from release.backends import backend_for
from release.backends.recipe import BackendName
from release.init.detect import Finding, Note, TorchLookup, targets_of
from release.init.torchaxes import force_build, force_cuda, python_axis, stable_abi, torch_pin
from release.project import Naming, Reading, naming
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
    found: tuple[Finding, ...] = ()
    changes: tuple[Note, ...] = ()
    undecided: tuple[Note, ...] = ()


def decide(
    read: Reading,
    backend: tuple[BackendName, str],
    lookup: TorchLookup | None,
    *,
    torch_index: str | None = None,
) -> Decision:
    """The matrix for the project `read` describes, built by `backend` (name, why)."""
    name, source = backend
    named = naming(read)
    found = [Finding(key="backend", value=name, source=source), *_naming_findings(named)]
    undecided = _naming_notes(named)
    targets = targets_of(read, name)
    found += targets.found
    changes = list(targets.changes)
    undecided += targets.undecided
    decision = Decision(
        backend=name,
        name=named.name.value if named.name and named.name.value else "this project",
        arches=ARCHES[name],
        manylinux=MANYLINUX[name],
        sms=targets.sms,
        ptx=targets.ptx,
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
            decision, found=tuple(found), changes=tuple(changes), undecided=tuple(undecided)
        )
    pin = torch_pin(read.pyproject, lookup, read.setup_py)
    axis = python_axis(read, pin)
    env, switches, gates = force_cuda(read.setup_py)
    forced, builds, downloads = force_build(read.setup_py)
    abi, crossed = stable_abi(read.setup_py)
    found += [*([pin.found] if pin.found else []), axis.found, *switches, *builds, *abi]
    changes += [*gates, *downloads, *crossed]
    undecided += [*pin.undecided, *axis.undecided]
    return replace(
        decision,
        abi3=axis.abi3,
        python=axis.python,
        torch=pin.version,
        torch_index=torch_index,
        build_env=tuple(sorted({**dict(env), **dict(forced)}.items())),
        found=tuple(found),
        changes=tuple(changes),
        undecided=tuple(undecided),
    )


def _naming_findings(named: Naming) -> list[Finding]:
    out = []
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
