"""A project's name and version where its files compute them (setuptools-scm, a setup.py
that reads a version file; literals are release.project's to read): asked of its PEP 517
backend (`prepare_metadata_for_build_wheel`, never a build), in the environment its build
uses (the cell's TORCH_CUDA_ARCH_LIST, CUDA_HOME and the matrix's build.env too), and cached
per commit. What asking installs is said before anything is.

A torch project's setup.py imports torch, so its hook runs in the venv of its first torch
cell (the pinned torch, provisioned as the build would, and kept for it); any other
project's runs in an isolated environment of its build requirements. The answer is kept
under the cache's metadata/ by the checkout's commit and the project's place in it; a
checkout with changes is asked every time.

The pure core reads the hook's METADATA and names the cache entry; the edge runs git and
the hook through a `proc.Runner`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.metadata import InvalidMetadata, Metadata
from packaging.utils import InvalidName, canonicalize_name
from packaging.version import InvalidVersion, Version

from release import proc
from release.backends.registry import targets_variables
from release.backends.torch_extension import torch_arch_list
from release.errors import ConfigError
from release.fsutil import json_document, read_document, write_atomic
from release.matrix import Cell, Matrix
from release.matrix.load import MetadataSource
from release.project import Naming
from release.project.pyproject import read_pyproject
from release.resources import script
from release.toolchain.buildenv import (
    cell_plan,
    cuda_home_of,
    environment_of,
    provision_environment,
)
from release.toolchain.cacheroot import default_cache_dir, toolchain_cache
from release.toolchain.plan import host_machine
from release.toolchain.provision import Progress, provision

# The build-requirement plugins whose version is the checkout's tag, as setuptools-scm says it.
VCS_PLUGINS = ("setuptools-scm", "hatch-vcs")

# setuptools writes <name>.egg-info beside the sources unless told otherwise.
SETUPTOOLS_CONFIG = "[egg_info]\negg_base = {out}\n"

# ---------------------------------------------------------------- pure core


@dataclass(frozen=True)
class ProjectMetadata:
    name: str
    version: Version


def from_metadata(text: str, where: Path) -> ProjectMetadata:
    """Name and version from a METADATA file's text."""
    try:
        parsed = Metadata.from_email(text, validate=False)
        canonicalize_name(parsed.name, validate=True)  # no path or markup rides in a name
        return ProjectMetadata(name=parsed.name, version=Version(str(parsed.version)))
    except (InvalidMetadata, InvalidName, InvalidVersion, ValueError, TypeError) as error:
        raise ConfigError(
            [f"{where}: the build backend's metadata has no usable name and version: {error}"]
        ) from None


def cache_key(commit: str, place: str) -> str:
    """The cache entry of a project at `place` (relative to the checkout) at `commit`."""
    return hashlib.sha256(f"{commit}\0{place}".encode()).hexdigest()[:32]


def asking_note(matrix: Matrix, naming: Naming | None, toolchains: Path) -> str:
    """What a command says before it asks the build backend: which of name and version is
    computed where, and what asking installs (said before anything is downloaded)."""
    project = matrix.project.path
    what = (naming.unsaid(project) + ": ") if naming is not None else ""
    cell = hook_cell(matrix)
    spec = environment_of(cell) if cell is not None else None
    if cell is not None and spec is not None:
        where = (
            f"in the build environment of cell {cell.id}: this provisions nvcc for CUDA "
            f"{cell.cuda} and {spec.label} into {toolchains}, where they are not there yet, as "
            "`release build` would"
        )
    else:
        where = (
            "in an isolated environment of its build requirements, which pip installs from "
            "its index"
        )
    return (
        f"{what}asking the build backend for the name and version "
        f"(prepare_metadata_for_build_wheel, not a build) {where}; the answer is kept for "
        "this commit"
    )


def hook_environment(cell: Cell | None, cuda_home: Path | None) -> dict[str, str]:
    """What the cell's build sets that a setup.py may read while it only says its name and
    version (a guard that refuses to run without TORCH_CUDA_ARCH_LIST, a force-CUDA switch):
    for a cell built in an environment of its own, TORCH_CUDA_ARCH_LIST from its sms and ptx
    and that environment's CUDA_HOME, exactly as its build gets them; then the matrix's
    `build.env` and `targets-env`, as the build adds them after the backend's."""
    if cell is None:
        return {}
    env: dict[str, str] = {}
    if cuda_home is not None:
        env["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(cell.sms, cell.ptx)
        env["CUDA_HOME"] = str(cuda_home)
    env.update(cell.build.env)
    env.update(targets_variables(cell.build.targets_env, cell.sms, cell.ptx))
    return env


def hook_cell(matrix: Matrix) -> Cell | None:
    """The cell whose build environment runs the hook (a torch project's setup.py imports
    torch): of the cells whose backend asks for one, one of this machine's arch first (its
    torch can be imported here)."""
    built_in_one = [c for c in matrix.cells if environment_of(c) is not None]
    native = [c for c in built_in_one if c.arch == host_machine()]
    chosen = native or built_in_one
    return chosen[0] if chosen else None


# ---------------------------------------------------------------- edge


def _checkout(project: Path, runner: proc.Runner, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(commit, the project's place in the checkout) where the checkout has no changes."""
    git = ["git", "-C", str(project)]
    head = runner([*git, "rev-parse", "HEAD", "--show-prefix"], env=env, separate_stderr=True)
    status = runner([*git, "status", "--porcelain", "--", "."], env=env, separate_stderr=True)
    if not head.ok or not status.ok or status.output.strip():
        return None
    lines = head.output.splitlines()
    return lines[0].strip(), (lines[1].strip() if len(lines) > 1 else "")


def _cached(path: Path) -> ProjectMetadata | None:
    try:
        data = json_document(read_document(path), str(path))
        return ProjectMetadata(name=str(data["name"]), version=Version(str(data["version"])))
    except (OSError, ValueError, KeyError, TypeError, InvalidVersion):
        return None  # absent or damaged: asked again


def _hook_python(
    matrix: Matrix,
    cache_dir: Path,
    *,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None,
) -> tuple[str, bool, dict[str, str]]:
    """The Python that runs the hook, whether it makes an isolated environment, and the
    variables the cell's build would set (`hook_environment`)."""
    cell = hook_cell(matrix)
    spec = environment_of(cell) if cell is not None else None
    if cell is None or spec is None:
        return python, True, hook_environment(next(iter(matrix.cells), None), None)
    toolchains = toolchain_cache(cache_dir)
    plan = cell_plan(cell, cuda_home=None, cache_dir=toolchains)
    toolkit = cuda_home_of(provision(plan, python=python, env=env, progress=progress))
    if toolkit is None:
        raise ConfigError([f"{cell.id}: the {cell.build.backend} backend needs nvcc"])
    environment = provision_environment(
        spec,
        toolkit=toolkit,
        cache_dir=toolchains,
        python=python,
        env=env,
        progress=progress,
    )
    return str(environment.python), False, hook_environment(cell, environment.cuda_home)


def project_metadata(
    matrix: Matrix,
    *,
    cache_dir: Path,
    env: Mapping[str, str],
    runner: proc.Runner = proc.run,
    python: str = sys.executable,
    progress: Progress | None = None,
    naming: Naming | None = None,
    say: Callable[[str], None] | None = None,
) -> ProjectMetadata:
    """The name and version the project's build backend gives `matrix`'s project; `say`
    hears what asking it installs before anything is (`naming`: where the files compute
    them)."""
    project = matrix.project.path
    checkout = _checkout(project, runner, env)
    entry = cache_dir / "metadata" / f"{cache_key(*checkout)}.json" if checkout else None
    if entry is not None and (found := _cached(entry)) is not None:
        return found
    if say is not None:
        say(asking_note(matrix, naming, toolchain_cache(cache_dir)))
    hook_python, isolated, cell_env = _hook_python(
        matrix, cache_dir, python=python, env=env, progress=progress
    )
    with tempfile.TemporaryDirectory(prefix="release-metadata-") as tmp:
        config = Path(tmp) / "setup.cfg"
        config.write_text(SETUPTOOLS_CONFIG.format(out=tmp), encoding="utf-8")
        ran = runner(
            [
                hook_python,
                str(script("metadata_hook.py")),
                str(project),
                tmp,
                "isolated" if isolated else "venv",
            ],
            env={**env, **cell_env, "DIST_EXTRA_CONFIG": str(config)},
        )
    where = project / "pyproject.toml"
    where = where if where.is_file() else project / "setup.py"
    answer = _answer(ran)
    if answer is None:
        raise ConfigError(
            [f"{where}: no static [project] name and version, and asking the build backend "
             f"for them failed: {proc.failure('prepare_metadata_for_build_wheel', ran)}"],
            hint="put name and version in pyproject.toml's [project], or fix the build "
            "backend's error above",
        )  # fmt: skip
    if "metadata" not in answer:
        raise ConfigError(
            [f"{where}: no static [project] name and version, and the build backend has "
             "no prepare_metadata_for_build_wheel (only a whole build would say them)"],
            hint="put name and version in pyproject.toml's [project]",
        )  # fmt: skip
    found = from_metadata(str(answer["metadata"]), where)
    if entry is not None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        blob = {"name": found.name, "version": str(found.version)}
        write_atomic(entry, (json.dumps(blob, sort_keys=True) + "\n").encode())
    return found


def versioned_by_vcs(pyproject_text: str | None) -> str | None:
    """The plugin that computes the version from the checkout's tags (setuptools-scm or
    hatch-vcs, named in [build-system] requires), or None."""
    if not pyproject_text:
        return None
    read = read_pyproject(pyproject_text)
    names = {canonicalize_name(r.requirement.name) for r in read.requires}
    return next((plugin for plugin in VCS_PLUGINS if plugin in names), None)


def vcs_version(project: Path, name: str, env: Mapping[str, str]) -> Version | None:
    """The version setuptools-scm computes for the checkout of `project` (its own library,
    with the project's [tool.setuptools_scm] settings, and SETUPTOOLS_SCM_PRETEND_VERSION
    of `env` as setuptools-scm honours it); None where the project's version is not a VCS
    plugin's. Runs git, never the project's code, and installs nothing."""
    pyproject = project / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if versioned_by_vcs(text) is None:
        return None
    import setuptools_scm  # noqa: PLC0415  (some 25 ms of a start, for VCS-versioned projects only)

    try:
        with warnings.catch_warnings():
            # vcs-versioning 1.x asks callers to build a VcsEnvironment, an API still moving
            # (the pin below 11 keeps this call's shape)
            warnings.simplefilter("ignore", DeprecationWarning)
            config = setuptools_scm.Configuration.from_file(pyproject, dist_name=name, env=env)
            computed = setuptools_scm._get_version(config, force_write_version_files=False)
    except (LookupError, ValueError, OSError) as error:
        raise ConfigError(
            [f"{pyproject}: setuptools-scm could not compute the version: {error}"],
            hint="tag the commit (git tag v1.2.3), or fetch the tags (actions/checkout's "
            "fetch-depth: 0)",
        ) from None
    if computed is None:
        return None
    try:
        return Version(computed)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        problem = f"{pyproject}: setuptools-scm's version {computed!r} is not PEP 440"
        raise ConfigError([problem]) from None


def asking_the_backend(
    cache_dir: Path | None, env: Mapping[str, str], say: Callable[[str], None] | None = None
) -> MetadataSource:
    """What `load_matrix` calls for a project whose files compute its name or version (with
    the cache at `cache_dir`, else the default one); `say` hears what it installs first. A
    version from the checkout's tags (setuptools-scm, hatch-vcs) is read from them, beside a
    literal name, without asking the backend."""

    def named(provisional: Matrix, naming: Naming) -> tuple[str, Version]:
        literal = naming.name.value if naming.name is not None else None
        if literal is not None:
            tagged = vcs_version(provisional.project.path, literal, env)
            if tagged is not None:
                return literal, tagged
        root = (cache_dir or default_cache_dir(env, Path.home())).resolve()
        found = project_metadata(provisional, cache_dir=root, env=env, naming=naming, say=say)
        return found.name, found.version

    return named


def _answer(ran: proc.Completed) -> Mapping[str, object] | None:
    if not ran.ok:
        return None
    for line in reversed(ran.output.strip().splitlines()):
        try:
            data = json_document(line, "the hook's answer")
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None
