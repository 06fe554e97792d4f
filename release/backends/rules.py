"""The rules a `build:` section follows, whatever its backend: the matrix sets no variable
or config setting the backend gets from the cell, no credential and no SOURCE_DATE_EPOCH;
a prepare step is the release's, its paths inside the repository and apart from the
project's sources; its build requirements are PEP 508 requirements (a torch cell's
torch is its pin), and CUDA libraries go to the backends that get a CUDA_HOME; and the
cell's targets are ones its backend can build.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

from packaging.requirements import InvalidRequirement
from packaging.utils import canonicalize_name

from release import pep508
from release.backends.nvcc import cross_problem, missing_nvcc
from release.backends.recipe import BackendName, BuildSpec, PrepareSpec, TargetsFormat
from release.backends.registry import backend_for
from release.credentials import has_credentials, is_secret_name
from release.defaults import COMPILE_JOBS_RANGE
from release.errors import shown
from release.proc import is_environment_name
from release.targets import GpuTarget
from release.yamlspec import join_path

DEFAULT_DIST = "dist"  # release's output where --out says none
# Where the build's processes find their programs, libraries and Python modules. release
# composes PATH and LIBRARY_PATH for each cell (the pinned toolchain and the build
# environment first); a value of the matrix's would replace that for the whole build, and the
# wheel would take its compiler, libraries or modules from the machine that builds it.
_SEARCH_PATHS = frozenset(
    {"PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME"}
)


def env_problem(name: str, backend: BackendName) -> str | None:
    """Why `name` cannot be a variable of a `build:` section's env for `backend`."""
    if not is_environment_name(name):
        return f"{shown(name)} is not an environment variable name"
    if name in backend_for(backend).owned_env:
        return (
            f"{name} is what `release` gives the {backend} backend from the cell "
            "(the sms, ptx and toolchain of the matrix say it): remove it"
        )
    if is_secret_name(name):  # a build never sees publishing credentials
        return (
            f"{name} looks like a credential: a build never gets one (the publish "
            "step reads credentials from its own environment)"
        )
    if name == "SOURCE_DATE_EPOCH":
        return "SOURCE_DATE_EPOCH is set by `release build` (the last commit's time)"
    if name in _SEARCH_PATHS:
        return (
            f"{name} would take the build's programs or libraries from the machine that "
            "builds it, not from the cell's pinned toolchain and build environment: remove it "
            "(a build tool goes in build.requires, a CUDA library in build.cuda-libraries)"
        )
    return None


def spec_problems(spec: BuildSpec, backend: BackendName, path: str) -> list[tuple[str, str]]:
    """(key path, message) for each rule the `build` section at `path` breaks when built by
    `backend` (the backend in force there, which may come from the release's section)."""
    problems: list[tuple[str, str]] = []
    fewest, most = COMPILE_JOBS_RANGE  # --compile-jobs's range
    if spec.compile_jobs is not None and not fewest <= spec.compile_jobs <= most:
        problems.append(
            (join_path(path, "compile-jobs"), f"must be a whole number from {fewest} to {most}")
        )
    for name, value in (spec.env or {}).items():
        problem = env_problem(name, backend)
        if problem is None and has_credentials(value):
            problem = f"{shown(value)} {_COMMITTED}"
        if problem is not None:
            problems.append((join_path(join_path(path, "env"), name), problem))
    for name in spec.targets_env or {}:
        problem = env_problem(name, backend)
        if problem is None and name in (spec.env or {}):
            problem = f"{name} is in env too: the cell's targets are its value, remove one"
        if problem is not None:
            problems.append((join_path(join_path(path, "targets-env"), name), problem))
    chosen = backend_for(backend)
    for name, value in (spec.config_settings or {}).items():
        key = join_path(join_path(path, "config-settings"), name)
        if name in chosen.owned_settings:
            message = (
                f"{name} is what `release` gives the {backend} backend from the cell: remove it"
            )
            problems.append((key, message))
        elif (problem := chosen.setting_problem(name, value)) is not None:
            problems.append((key, problem))
    seen: set[str] = set()
    for index, text in enumerate(spec.requires or ()):
        problem = _requirement_problem(text, backend, seen)
        if problem is not None:
            problems.append((join_path(join_path(path, "requires"), index), problem))
    libraries = spec.cuda_libraries or []
    for index, library in enumerate(libraries):
        if library in libraries[:index]:
            key = join_path(join_path(path, "cuda-libraries"), index)
            problems.append((key, f"{shown(library)} is listed twice"))
    if spec.cuda_libraries and not chosen.needs_nvcc:
        problems.append(
            (
                join_path(path, "cuda-libraries"),
                f"the {backend} backend gets no CUDA_HOME (csrc's contract brings its own "
                "NVRTC): cuda-libraries are for cmake and torch cells",
            )
        )
    return problems


def prepare_problems(
    prepare: PrepareSpec, path: str, *, project: str | None, matrix_name: str = "matrix.yaml"
) -> list[tuple[str, str]]:
    """(key path, message) for each rule the prepare step at `path` breaks: it is the
    release's (`project` is the matrix's `project:`; None for a CUDA version's `build`),
    its command splits into words, its files are inside matrix.yaml's directory, and its
    output is neither the project's sources nor holds the version file."""
    if project is None:
        return [(path, "a prepare step is the release's: move it to the top-level build")]
    problems: list[tuple[str, str]] = []
    try:
        words = shlex.split(prepare.command)
    except ValueError as error:
        words, problems = [], [(join_path(path, "command"), f"cannot be split: {error}")]
    if not words and not problems:
        problems.append((join_path(path, "command"), "is empty: name the command to run"))
    if prepare.timeout is not None and prepare.timeout < 1:
        problems.append((join_path(path, "timeout"), "must be 1 (second) or more"))
    paths = {"version-file": prepare.version_file, "output": prepare.output}
    for key, value in paths.items():
        problem = _inside_problem(value) if value is not None else None
        if problem is not None:
            problems.append((join_path(path, key), problem))
    if problems or prepare.output is None:
        return problems
    output = PurePosixPath(prepare.output)
    sources = PurePosixPath(project)
    if output == sources or output in sources.parents:
        problems.append(
            (
                join_path(path, "output"),
                f"{prepare.output} holds the project ({project}), and release empties it "
                "before the command: name the directory the command stages into",
            )
        )
    problems.extend(_output_overlap(prepare, path, matrix_name))
    if prepare.version_file is not None and output in PurePosixPath(prepare.version_file).parents:
        problems.append(
            (
                join_path(path, "version-file"),
                f"{prepare.version_file} is inside the output {prepare.output}, which release "
                "empties before the command: name the file the command reads the version from",
            )
        )
    return problems


def _output_overlap(prepare: PrepareSpec, path: str, matrix_name: str) -> list[tuple[str, str]]:
    """The output where it is release's default output (dist/, which --out may move: that
    overlap is the build's to see), the version file or the matrix file itself."""
    output = PurePosixPath(prepare.output or ".")
    dist = PurePosixPath(DEFAULT_DIST)
    if output == dist or dist in output.parents:
        why = f"{prepare.output} is in {DEFAULT_DIST}/, where release writes its wheels"
    elif prepare.version_file is not None and output == PurePosixPath(prepare.version_file):
        why = f"{prepare.output} is the version file, which release writes the version into"
    elif output == PurePosixPath(matrix_name):
        why = f"{prepare.output} is {matrix_name} itself"
    else:
        return []
    return [(join_path(path, "output"), f"{why}: name the directory the command stages into")]


def _inside_problem(value: str) -> str | None:
    """Why `value` is not a path inside matrix.yaml's directory (relative, no `..`)."""
    pure = PurePosixPath(value)
    if not value or pure.is_absolute() or ".." in pure.parts or pure == PurePosixPath("."):
        return (
            f"{shown(value)} is not a path inside matrix.yaml's directory (write it relative "
            "to it, without ..)"
        )
    if any(not c.isprintable() for c in value):
        return f"{shown(value)} holds a line break or another control character, as no path may"
    if ".git" in pure.parts:
        return f"{shown(value)} is inside .git, git's own directory: name a path of the checkout"
    return None


# matrix.yaml is committed: a credential in it is published with the repository
_COMMITTED = (
    "holds credentials, and matrix.yaml is committed: give them in the environment release "
    "runs in (a CI secret: pip reads PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and a netrc)"
)


def _requirement_problem(text: str, backend: BackendName, seen: set[str]) -> str | None:
    """Why `text` cannot be a build requirement of a `backend` cell, after those whose
    names `seen` holds (which it adds to)."""
    try:
        requirement = pep508.requirement(text)
    except InvalidRequirement as error:
        why = str(error).splitlines()[0]  # packaging adds the text and a caret below
        return f"{shown(text)} is not a PEP 508 requirement ({why})"
    name = canonicalize_name(requirement.name)
    if name in seen:
        return f"{requirement.name} is required twice: keep one requirement of it"
    seen.add(name)
    if backend_for(backend).torch_axes and name == "torch":
        return "a torch cell builds against its pinned torch (torch:): remove it here"
    if requirement.url is not None and has_credentials(requirement.url):
        return f"{shown(text)} {_COMMITTED}"
    if requirement.url is not None and requirement.url.startswith("file:"):
        return (
            f"{shown(text)} names a file of this machine, which no other machine that "
            "rebuilds the release has: name a release on an index"
        )
    return None


def targets_problem(
    backend: BackendName,
    sms: Sequence[GpuTarget],
    ptx: GpuTarget | None,
    targets_env: Sequence[tuple[str, TargetsFormat]] = (),
) -> str | None:
    """Why `backend` cannot build exactly these targets, with the remedy; None if it can.
    A `targets-env` variable of TORCH_CUDA_ARCH_LIST's form holds them to torch's rule."""
    problem = backend_for(backend).targets_problem(sms, ptx)
    named = [name for name, form in targets_env if form == "torch-arch-list"]
    if problem is None and named and (torch := backend_for("torch").targets_problem(sms, ptx)):
        problem = f"{named[0]} of targets-env (torch-arch-list): {torch}"
    return problem


def nvcc_problem(backend: BackendName, cuda: str, device_compiler: str) -> str | None:
    """Why the toolchain planned for a CUDA version cannot serve `backend` (CMake and torch
    drive nvcc, and PyPI has none for CUDA 12.x); None if it can."""
    if not backend_for(backend).needs_nvcc:
        return None
    return missing_nvcc(backend, cuda, device_compiler)


def placement_problem(backend: BackendName, target_arch: str, host_arch: str) -> str | None:
    """Why a cell of `target_arch` does not build on a `host_arch` machine; None if it does.
    csrc's backend cross-compiles its host library with zig; nvcc-driven backends build
    each arch natively."""
    if not backend_for(backend).needs_nvcc:
        return None
    return cross_problem(backend, target_arch, host_arch)
