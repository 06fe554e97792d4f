"""Where a built wheel's runtime dependencies are looked up for the shared libraries they
provide (release.inspection.runtimelibs), so that the manylinux verdict leaves those out
and names every other library the wheel needs that nothing provides.

- A cell built in an environment of its backend's own (a torch cell's venv) looks them up
  there: what its build linked against is installed in it.
- An isolated PEP 517 build's environment is gone when its wheel is checked: the wheel's
  Requires-Dist is installed by pip (with what it requires in turn, binary wheels a
  machine of the cell's platform installs, older manylinux levels included) into a scratch
  site in the cache, once per distinct set of
  requirements, the same downloads a user's `pip install` of the wheel makes. That is
  asked only of a wheel that needs a library the wheel and the manylinux policy do not
  provide.

Pure: `scratch_key`, `compatible_platforms`, `scratch_command`. Edge: `runtime_libraries`
(reads a site-packages directory, runs pip through release.proc) and `libraries_verdict`,
auditwheel's verdict with what they provide left out.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release import proc
from release.backends import DRIVER_LIBRARY
from release.building.settings import BuildEnv, CellFailure
from release.credentials import without_credentials
from release.inspection.runtimelibs import (
    installed_distributions,
    marker_environment,
    provided_by,
    reached,
    wheel_requirements,
)
from release.inspection.verdict import ManylinuxVerdict, manylinux_verdict
from release.matrix import Cell
from release.toolchain.buildenv import cell_targets
from release.toolchain.cudahome import DRIVER_SONAME

COMPLETE = ".complete"


@dataclass(frozen=True, kw_only=True)
class RuntimeLibraries:
    """The sonames the wheel's runtime dependencies provide (each with its distribution),
    and the distributions its Requires-Dist reaches, by name."""

    provided: Mapping[str, str] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()


def scratch_key(requirements: Sequence[str], platform_tag: str, python: str) -> str:
    blob = json.dumps([sorted(requirements), platform_tag, python])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_MANYLINUX = re.compile(r"^manylinux_(?P<major>[0-9]+)_(?P<minor>[0-9]+)_(?P<arch>.+)$")
# PEP 600's names of the manylinux levels before it, by glibc minor
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def compatible_platforms(platform_tag: str) -> list[str]:
    """The platform tags of the wheels a machine of `platform_tag` installs, newest first:
    for `manylinux_2_N_<arch>` every glibc 2 level down to the oldest manylinux of the arch
    (PEP 600), with the legacy names of 2_17, 2_12 and 2_5; any other tag alone. pip
    takes each --platform as it is given."""
    match = _MANYLINUX.match(platform_tag)
    if match is None or match["major"] != "2":
        return [platform_tag]
    arch = match["arch"]
    oldest = 5 if arch in ("x86_64", "i686") else 17
    minors = range(int(match["minor"]), oldest - 1, -1)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in minors]
    return tags + [f"{_LEGACY[minor]}_{arch}" for minor in minors if minor in _LEGACY]


def scratch_command(
    python: str, target: Path, platform_tag: str, requirements: Sequence[str]
) -> list[str]:
    """pip installs `requirements` and what they require into `target`: binary wheels a
    machine of `platform_tag` installs only, nothing compiled, no scripts."""
    platforms = [word for tag in compatible_platforms(platform_tag) for word in ("--platform", tag)]
    return [
        python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile",
        "--only-binary", ":all:", *platforms, "--target", str(target), *requirements,
    ]  # fmt: skip


def runtime_libraries(
    wheel: Path,
    cell: Cell,
    *,
    environment: BuildEnv | None,
    scratch_root: Path | None,
    python: str,
    env: Mapping[str, str],
    log: Path,
    runner: proc.Runner = proc.run,
) -> RuntimeLibraries:
    """What the wheel's runtime dependencies provide, looked up in the cell's build
    environment, else in a scratch site (`scratch_root`; None: nowhere). Raises
    CellFailure where pip cannot install them."""
    requirements = wheel_requirements(wheel.read_bytes())
    if not requirements:
        return RuntimeLibraries()
    if environment is not None:
        site = environment.site_packages
    elif scratch_root is not None:
        site = _scratch_site(
            requirements, cell, scratch_root, python=python, env=env, log=log, runner=runner
        )
    else:
        site = None
    if site is None:
        return RuntimeLibraries()
    installed = installed_distributions(site)
    markers = marker_environment(_python_of(cell), cell.arch)
    return RuntimeLibraries(
        provided=provided_by(requirements, installed, markers),
        dependencies=tuple(d.name for d in reached(requirements, installed, markers)),
    )


def _python_of(cell: Cell) -> str:
    """The CPython ("3.11") the cell's markers are evaluated for: the one it builds with."""
    return cell_targets(cell).python or ""


def _scratch_site(
    requirements: Sequence[str],
    cell: Cell,
    root: Path,
    *,
    python: str,
    env: Mapping[str, str],
    log: Path,
    runner: proc.Runner,
) -> Path:
    """The scratch site of `requirements` for the cell's platform, installed once: into a
    directory of this call's own, then moved into place (a cell beside it may do the same)."""
    target = root / scratch_key(requirements, cell.platform_tag, _python_of(cell))
    if (target / COMPLETE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    command = scratch_command(python, building, cell.platform_tag, requirements)
    done = runner(command, env=without_credentials(env), log=log)
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise CellFailure(
            "the wheel needs libraries from outside it, and pip cannot install its "
            f"Requires-Dist to look for them ({', '.join(requirements)}): "
            f"{proc.one_line_tail(done.output + done.stderr)}",
            proc.tail(done.output + done.stderr),
        )
    (building / COMPLETE).write_text("", encoding="utf-8")
    if not (target / COMPLETE).is_file():
        shutil.rmtree(target, ignore_errors=True)  # an earlier one cut short
    try:
        building.rename(target)
    except OSError:  # another cell put its own there first
        shutil.rmtree(building, ignore_errors=True)
    return target


def libraries_verdict(
    wheel: Path,
    cell: Cell,
    *,
    environment: BuildEnv | None,
    scratch_root: Path | None,
    python: str,
    env: Mapping[str, str],
    log: Path,
    runner: proc.Runner = proc.run,
) -> ManylinuxVerdict:
    """auditwheel's verdict with the libraries the wheel's runtime dependencies provide
    left out (release.building.runtimedeps). An isolated build's dependencies are installed
    only where the wheel needs a library that neither it nor the policy provides."""
    # the driver's libcuda, where the matrix declares it: every machine with a GPU has it
    driver = (DRIVER_SONAME,) if DRIVER_LIBRARY in cell.build.cuda_libraries else ()
    if environment is None:
        first = manylinux_verdict(wheel, manylinux=cell.manylinux, arch=cell.arch, provided=driver)
        if not first.external_libraries:
            return first
    found = runtime_libraries(
        wheel, cell, environment=environment, scratch_root=scratch_root,
        python=python, env=env, log=log, runner=runner,
    )  # fmt: skip
    return manylinux_verdict(
        wheel,
        manylinux=cell.manylinux,
        arch=cell.arch,
        provided=(*found.provided, *driver),
        dependencies=found.dependencies,
    )
