"""auditwheel's verdict on a built wheel (`auditwheel_problems` of `auditwheel show`: it
reads the ELF files, so it works for any arch) and the inspection of its contents against
its cell (`inspected`: filename, metadata, tags, the device code of its fatbins and
shared objects, listed by cuobjdump, and an abi3 wheel's limited API, audited by
abi3audit). release.build.pipeline holds every wheel to both.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

from release import proc
from release.credentials import without_credentials
from release.inspection.devicecode import elf_lister
from release.inspection.fatbin import FatbinLister, lister
from release.inspection.limitedapi import limited_api_auditor
from release.inspection.wheel import WheelReport, inspect_wheel
from release.matrix import Cell
from release.toolchain import Toolchain


def show_command(python: str, wheel: Path) -> list[str]:
    """auditwheel's verdict on a wheel; it reads the ELF files, so it works for any arch."""
    return [python, "-m", "auditwheel", "show", str(wheel)]


_SHOW_TAG = re.compile(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"')


def auditwheel_problems(output: str, cell: Cell) -> list[str]:
    """What `auditwheel show` says that makes the wheel unfit for the cell's manylinux tag."""
    match = _SHOW_TAG.search(output)
    if match is None:
        return [f"auditwheel show gave no platform tag: {proc.one_line_tail(output)}"]
    tag = match.group(1)
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    wanted = tuple(int(p) for p in cell.manylinux.split("_"))
    if found is None or (int(found.group(1)), int(found.group(2))) > wanted:
        return [f"auditwheel: the wheel is only {tag}, not {cell.platform_tag}"]
    if found.group(3) != cell.arch:
        return [f"auditwheel: the wheel's libraries are {found.group(3)}, the cell is {cell.arch}"]
    if "required by the wheel:" in output:
        needed = output.rsplit("required by the wheel:", maxsplit=1)[-1]
        return [
            "auditwheel: the wheel needs shared libraries outside manylinux: "
            + proc.one_line_tail(needed, 5)
        ]
    return []


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
