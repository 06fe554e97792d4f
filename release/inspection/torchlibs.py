"""auditwheel's verdict on a torch extension wheel, with torch's own libraries left out of
the manylinux policy.

A torch extension links libtorch, libc10 and the CUDA libraries of torch's wheels; `import
torch` has loaded them all before the extension's library is opened, so they are found by
soname whatever the wheel holds. They are neither bundled (a second libtorch in one process
means two operator registries) nor held to manylinux, as vLLM, torchao and the other torch
extension projects ship. Every other library the wheel needs from outside the manylinux
policy still makes it refused.

Pure: `verdict_problems`. Edge: `torch_audit_verdict` reads the wheel through auditwheel's
Python API (`auditwheel show` cannot exclude libraries).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# auditwheel has no py.typed: mypy reports it once, at its first import
from auditwheel import error as auditwheel_error  # type: ignore[import-untyped]
from auditwheel import wheel_abi

from release.backends.torch_extension import TORCH_PROVIDED

# auditwheel's base error: AuditwheelError from 6.5.1, AuditwheelException before
AUDITWHEEL_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(auditwheel_error, name)
    for name in ("AuditwheelError", "AuditwheelException")
    if hasattr(auditwheel_error, name)
)


@dataclass(frozen=True, kw_only=True)
class TorchAuditVerdict:
    platform_tag: str  # the best tag auditwheel finds: manylinux_2_28_x86_64, linux_x86_64
    external_libraries: tuple[str, ...]  # sonames needed from outside manylinux and torch
    problems: tuple[str, ...]


_MANYLINUX_TAG = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")


def verdict_problems(
    platform_tag: str, external_libraries: Sequence[str], *, manylinux: str, arch: str
) -> list[str]:
    """What makes a wheel auditwheel gives `platform_tag` and `external_libraries` unfit for
    `manylinux_<manylinux>_<arch>` (the messages of verdict.auditwheel_problems)."""
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
    if external_libraries:
        problems.append(
            "auditwheel: the wheel needs shared libraries outside manylinux: "
            + ", ".join(external_libraries)
        )
    return problems


def torch_audit_verdict(
    wheel: Path, *, manylinux: str, arch: str, provided: Sequence[str] = TORCH_PROVIDED
) -> TorchAuditVerdict:
    """auditwheel's verdict on `wheel` with the libraries `provided` matches excluded, held
    to `manylinux_<manylinux>_<arch>`. auditwheel finds the other libraries through the
    wheel's RPATH/RUNPATH, this process's LD_LIBRARY_PATH and the system's ld.so.conf."""
    # auditwheel keeps its reading of a wheel by path: a rebuilt wheel at the same path
    # would be answered from the old one.
    wheel_abi.get_wheel_elfdata.cache_clear()
    try:
        info = wheel_abi.analyze_wheel_abi(
            None,
            None,
            wheel,
            frozenset(provided),
            disable_isa_ext_check=False,
            allow_graft=False,
        )
    except AUDITWHEEL_ERRORS as error:
        return TorchAuditVerdict(
            platform_tag="",
            external_libraries=(),
            problems=(f"auditwheel: {' '.join(str(error).split())}",),
        )
    finally:
        wheel_abi.get_wheel_elfdata.cache_clear()
    tag = str(info.overall_policy.name)
    wanted = f"manylinux_{manylinux}_{arch}"
    names = {str(p.name) for p in info.policies}
    policy = wanted if wanted in names else str(info.policies.lowest.name)
    external = tuple(sorted(str(lib) for lib in info.external_refs[policy].libs))
    return TorchAuditVerdict(
        platform_tag=tag,
        external_libraries=external,
        problems=tuple(verdict_problems(tag, external, manylinux=manylinux, arch=arch)),
    )
