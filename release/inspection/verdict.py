"""auditwheel's verdict on a built wheel (`auditwheel_problems` of `auditwheel show`: it
reads the ELF files, so it works for any arch) and the inspection of its contents against
its cell (`inspected`: filename, metadata, tags, the device code of its fatbins and
shared objects, listed by cuobjdump, and an abi3 wheel's limited API, audited by
abi3audit). release.building.pipeline holds every wheel to both.
"""

from __future__ import annotations

import glob
import logging
import re
import sys
import zipfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# auditwheel has no py.typed: mypy reports it once, at its first import
from auditwheel import error as auditwheel_error  # type: ignore[import-untyped]
from auditwheel import wheel_abi

from release import proc
from release.credentials import without_credentials
from release.inspection.devicecode import elf_lister
from release.inspection.fatbin import FatbinLister, lister
from release.inspection.limitedapi import limited_api_auditor
from release.inspection.torchabi import SharedObject, shared_objects
from release.inspection.wheel import WheelReport, inspect_wheel
from release.matrix import Cell
from release.toolchain import Toolchain


def fatbin_lister(toolchain: Toolchain, env: Mapping[str, str]) -> FatbinLister:
    return lister(toolchain.cuobjdump, without_credentials(env))


def inspected(
    name: str,
    data: bytes,
    cell: Cell,
    toolchain: Toolchain,
    env: Mapping[str, str],
    *,
    python: str = sys.executable,
) -> WheelReport:
    """The inspection of a wheel's bytes against its cell (`report.ok` says whether it
    passed); an abi3 cell's wheel is also held to the limited API of its floor by abi3audit
    (beside this tool, in `python`)."""
    clean = without_credentials(env)
    return inspect_wheel(
        name,
        data,
        cell,
        list_fatbin=fatbin_lister(toolchain, env),
        list_elf=elf_lister(toolchain.cuobjdump, clean),
        audit_limited_api=limited_api_auditor(python, cell.abi3, clean) if cell.abi3 else None,
    )


# auditwheel logs what its command line would print ("couldn't detect wheel libc,
# defaulting to glibc" for a wheel whose libraries are not Python extensions, as csrc's
# ctypes library is): its verdict is what counts here, its log is not the user's.
_AUDITWHEEL_LOG = logging.getLogger("auditwheel")
_AUDITWHEEL_LOG.addHandler(logging.NullHandler())
_AUDITWHEEL_LOG.propagate = False

# auditwheel's base error: AuditwheelError from 6.5.1, AuditwheelException before
AUDITWHEEL_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(auditwheel_error, name)
    for name in ("AuditwheelError", "AuditwheelException")
    if hasattr(auditwheel_error, name)
)
# and what it raises for a wheel with shared libraries under .data/purelib
AUDITWHEEL_READ_ERRORS: tuple[type[Exception], ...] = (*AUDITWHEEL_ERRORS, RuntimeError)


@dataclass(frozen=True, kw_only=True)
class ManylinuxVerdict:
    platform_tag: str  # the best tag auditwheel finds: manylinux_2_28_x86_64, linux_x86_64
    external_libraries: tuple[str, ...]  # sonames needed from outside manylinux and `provided`
    problems: tuple[str, ...]


_MANYLINUX_TAG = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
LISTED_DEPENDENCIES = 6


def verdict_problems(
    platform_tag: str,
    external_libraries: Sequence[str],
    *,
    manylinux: str,
    arch: str,
    needed_by: Mapping[str, str] | None = None,
    dependencies: Sequence[str] = (),
) -> list[str]:
    """What makes a wheel unfit for `manylinux_<manylinux>_<arch>` whose own files
    auditwheel gives `platform_tag` (its libraries' symbol versions and machine, whatever
    they need), and whose `external_libraries` nothing provides: not the wheel, not the
    policy, not the distributions its Requires-Dist reaches (`dependencies`, by name);
    `needed_by` names the member that needs each."""
    wanted_tag = f"manylinux_{manylinux}_{arch}"
    wanted = tuple(int(p) for p in manylinux.split("_"))
    found = _MANYLINUX_TAG.fullmatch(platform_tag)
    problems: list[str] = []
    if found is None or (int(found.group(1)), int(found.group(2))) > wanted:
        problems.append(f"auditwheel: the wheel is only {platform_tag}, not {wanted_tag}")
    elif found.group(3) != arch:
        problems.append(
            f"auditwheel: the wheel's libraries are {found.group(3)}, the cell is {arch}"
        )
    reached = ", ".join(dependencies[:LISTED_DEPENDENCIES]) + (
        f" and {len(dependencies) - LISTED_DEPENDENCIES} more"
        if len(dependencies) > LISTED_DEPENDENCIES
        else ""
    )
    for library in external_libraries:
        member = (needed_by or {}).get(library)
        problems.append(
            f"{member or 'the wheel'} needs {library}, which nothing provides: not the wheel, "
            f"not the {wanted_tag} policy, not a distribution its Requires-Dist reaches "
            f"({reached or 'none'}) "
            + (
                "(libcuda is the NVIDIA driver's: add cuda to build.cuda-libraries in "
                "matrix.yaml where the wheel may import only where a driver is installed, or "
                'load it at run time with dlopen("libcuda.so.1") or cudaGetDriverEntryPoint)'
                if library.startswith("libcuda.so")
                else "(add the distribution that ships it to the project's dependencies, "
                "bundle it in the wheel, or link it statically)"
            )
        )
    return problems


def manylinux_verdict(
    wheel: Path,
    *,
    manylinux: str,
    arch: str,
    provided: Collection[str] = (),
    dependencies: Sequence[str] = (),
) -> ManylinuxVerdict:
    """auditwheel's verdict on `wheel`, held to `manylinux_<manylinux>_<arch>`, with the
    libraries the wheel holds itself and those `provided` (the sonames its runtime
    dependencies bring: release.inspection.runtimelibs, from `dependencies`) left out.
    auditwheel finds the other libraries through the wheel's RPATH/RUNPATH, this
    process's LD_LIBRARY_PATH and the system's ld.so.conf."""
    objects = _shared_objects(wheel)
    left_out = {*provided, *(PurePosixPath(o.name).name for o in objects)}
    # auditwheel's exclusions are fnmatch patterns: each name is matched as itself
    exclude = frozenset(glob.escape(name) for name in left_out)
    # auditwheel reads a wheel unpacked into a temporary directory it chdir()s into, which
    # is the whole process's working directory: cells built side by side (--jobs) ask one at
    # a time, and start no child meanwhile (proc.WORKING_DIRECTORY). It keeps its reading
    # of a wheel by path: a rebuilt wheel at the same path would be answered from the old one.
    try:
        with proc.WORKING_DIRECTORY:
            wheel_abi.get_wheel_elfdata.cache_clear()
            info = wheel_abi.analyze_wheel_abi(
                None, None, wheel, exclude, disable_isa_ext_check=False, allow_graft=False
            )
    except AUDITWHEEL_READ_ERRORS as error:
        return ManylinuxVerdict(
            platform_tag="",
            external_libraries=(),
            problems=(f"auditwheel: {' '.join(str(error).split())}",),
        )
    finally:
        wheel_abi.get_wheel_elfdata.cache_clear()
    tag = str(info.overall_policy.name)
    # the tag its own files earn, whatever libraries they need (those are said one by one)
    own = min(
        info.sym_policy,
        info.ucs_policy,
        info.pyfpe_policy,
        info.blacklist_policy,
        info.machine_policy,
    )
    wanted = f"manylinux_{manylinux}_{arch}"
    names = {str(p.name) for p in info.policies}
    policy = wanted if wanted in names else str(info.policies.lowest.name)
    external = tuple(sorted(str(lib) for lib in info.external_refs[policy].libs))
    needed_by = {lib: o.name for o in reversed(objects) for lib in o.needed}
    return ManylinuxVerdict(
        platform_tag=tag,
        external_libraries=external,
        problems=tuple(
            verdict_problems(
                str(own.name),
                external,
                manylinux=manylinux,
                arch=arch,
                needed_by=needed_by,
                dependencies=dependencies,
            )
        ),
    )


def _shared_objects(wheel: Path) -> tuple[SharedObject, ...]:
    """The wheel's shared objects with what each needs (none where it cannot be read: then
    auditwheel says why)."""
    try:
        return shared_objects(wheel.read_bytes())
    except (OSError, zipfile.BadZipFile):
        return ()
