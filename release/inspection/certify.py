"""What makes a freshly built wheel count as built, for `release build` and for a wheel built
elsewhere (`release env --record`): auditwheel's verdict, exactly the cell's platform tag
(`wheel tags`, which dates the rewritten RECORD by SOURCE_DATE_EPOCH), and the inspection
with the fatbins and the shared objects' device code listed by cuobjdump. A wheel that
fails raises `CellFailure`. Also the PEP 517 build that makes it (`build_command`) and the
date of its files when nothing gives one (`DEFAULT_EPOCH`), for every builder of a cell.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from release import proc
from release.credentials import without_credentials
from release.inspection.devicecode import elf_lister
from release.inspection.fatbin import FatbinLister, lister
from release.inspection.wheel import WheelReport, inspect_wheel
from release.matrix import Cell
from release.toolchain import Toolchain

DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest date a zip file can hold


def build_command(python: str, project: Path, outdir: Path) -> list[str]:
    return [python, "-m", "build", "--wheel", "--outdir", str(outdir), str(project)]


def show_command(python: str, wheel: Path) -> list[str]:
    """auditwheel's verdict on a wheel; it reads the ELF files, so it works for any arch."""
    return [python, "-m", "auditwheel", "show", str(wheel)]


def retag_command(python: str, wheel: Path, cell: Cell) -> list[str]:
    """Give the wheel exactly the cell's platform tag (filename, WHEEL and RECORD); the
    rewritten RECORD gets SOURCE_DATE_EPOCH's date from the environment."""
    return [
        python,
        "-m",
        "wheel",
        "tags",
        "--platform-tag",
        cell.platform_tag,
        "--remove",
        str(wheel),
    ]


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


class CellFailure(Exception):
    """A cell's wheel did not make it: what went wrong, the log tail, the inspection."""

    def __init__(self, error: str, tail: str = "", report: WheelReport | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.tail = tail
        self.report = report


def certify(
    wheel: Path,
    cell: Cell,
    toolchain: Toolchain,
    *,
    python: str,
    env: Mapping[str, str],
    log: Path,
) -> tuple[Path, WheelReport]:
    """What makes a freshly built wheel count as built: auditwheel's verdict, exactly the
    cell's platform tag, and the inspection. Raises CellFailure; returns the retagged wheel
    (beside `wheel`) and its report."""
    shown = proc.run(show_command(python, wheel), env=env, log=log)
    problems = auditwheel_problems(shown.output, cell)
    if shown.returncode != 0 or problems:
        raise CellFailure("; ".join(problems) or "auditwheel show failed", proc.tail(shown.output))
    if wheel.name != cell.wheel_filename:
        retagged = proc.run(retag_command(python, wheel, cell), env=env, log=log)
        wheel = wheel.parent / cell.wheel_filename
        if retagged.returncode != 0 or not wheel.is_file():
            raise CellFailure(
                proc.failure("retagging the wheel", retagged, detail=False),
                proc.tail(retagged.output),
            )
    return wheel, inspected(wheel.name, wheel.read_bytes(), cell, toolchain, env)


def inspected(
    name: str, data: bytes, cell: Cell, toolchain: Toolchain, env: Mapping[str, str]
) -> WheelReport:
    report = inspect_wheel(
        name,
        data,
        cell,
        list_fatbin=fatbin_lister(toolchain, env),
        list_elf=elf_lister(toolchain.cuobjdump, without_credentials(env)),
    )
    if not report.ok:
        raise CellFailure("inspection failed: " + "; ".join(report.problems), report=report)
    return report
