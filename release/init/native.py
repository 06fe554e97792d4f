"""What `release init` decides from a project's native code (release.project.native and
the layout around it): a JIT-first project's `device-code: none`, `python: any` for an
extension without Python C-API (or one whose bdist_wheel tags it so), the CUDA libraries
it links, the build requirements its build imports, its C++ standard, a local-version
switch on by default. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from packaging.requirements import InvalidRequirement
from packaging.utils import canonicalize_name

from release import pep508
from release.backends.recipe import DRIVER_LIBRARY, BackendName
from release.errors import as_given
from release.init.detect import TORCH_MODULES, Finding, Note
from release.project import Reading, Said
from release.project.layout import Layout
from release.project.native import CUDA_LIBRARIES, python_binding
from release.project.pyproject import read_pyproject

CMAKE_DRIVER = "cuda_driver"  # CUDA::cuda_driver, the driver's libcuda (-lcuda)


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
    elif backend == "torch" and (tagged := _tagged_abi_none(read)) is not None:
        python_any = True
        found.append(tagged)
    linked = _cuda_libraries(read, layout)
    libraries = [said for said, _ in linked]
    if libraries:
        first = libraries[0]
        flags = ", ".join(written for _, written in linked)
        driver = (
            f" ({DRIVER_LIBRARY}: the NVIDIA driver's libcuda, which no wheel carries, as a "
            "link stub; the wheel then needs libcuda.so.1 and imports only where a driver is "
            "installed)"
            if any(s.value == DRIVER_LIBRARY for s in libraries)
            else ""
        )
        found.append(
            Finding(
                key="build.cuda-libraries",
                value=" ".join(s.value or "" for s in libraries),
                source=f"{first.place}: {flags}: the toolchain's CUDA_HOME gets each, with "
                f"its headers and link, from PyPI's wheels of the cell's CUDA{driver}",
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


def _tagged_abi_none(read: Reading) -> Finding | None:
    """python: any where the project's own bdist_wheel tags its wheel with no Python ABI."""
    tagged = read.setup_py.abi_none if read.setup_py else None
    if tagged is None:
        return None
    tag = f"{as_given(tagged.python_tag) if tagged.python_tag else '...'}-none"
    return Finding(
        key="python",
        value="any",
        source=f"{tagged.place}: {tagged.command}.get_tag() tags the wheel {tag}: one wheel a "
        "cell for every Python, built with one CPython (py3-none: its shared objects may use "
        "no Python C-API, which the build's inspection checks)",
    )


def _cuda_libraries(read: Reading, layout: Layout) -> list[tuple[Said, str]]:
    """The CUDA libraries the build links, each as build.cuda-libraries names it (the
    driver's: `cuda`) and as the project writes it: setup.py's and the staging script's `-l`
    flags and `libraries=`, a CMakeLists.txt's CUDA:: targets and libraries linked by name
    (not an IDE-only one's)."""
    found = [(s, f"-l{s.value}") for s in layout.native.linked(CUDA_LIBRARIES | {DRIVER_LIBRARY})]
    cmake = read.cmakelists
    if cmake is not None and cmake.ide_only is None:
        named = {s.value for s, _ in found}
        for said in cmake.cuda_libraries:
            written = said.value or ""
            target = written.removeprefix("CUDA::")
            name = DRIVER_LIBRARY if target == CMAKE_DRIVER else target
            if name not in named and (name in CUDA_LIBRARIES or name == DRIVER_LIBRARY):
                found.append((replace(said, value=name), written))
                named.add(name)
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
