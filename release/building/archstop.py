"""Where a cell's build stopped for, or shows, GPU targets other than the cell's: the
failure the compile wrapper's stop record makes (`arch_failure`), whether the matrix can give
the cell the targets the project builds (`remedy_problem`), and the arch flags a build log
shows where the wrapper saw no compile (`logged_cause`), each with the cause and the two ways
out (release.backends.archflags words them), and a third where the project's flags follow a
variable of its own; and the project file a cell's backend reads flags from, as init reads
it (`project_setup_py`: the dry run's and doctor's warnings read it too).
"""

from __future__ import annotations

from pathlib import Path

from release.backends import backend_for
from release.backends.archflags import (
    Stop,
    cell_request,
    matrix_targets,
    stop_in_log,
    stop_message,
)
from release.building.settings import CellFailure
from release.matrix import Cell
from release.project.archchanges import flags_from_arch_list
from release.project.setuppy import SetupPy, read_setup_py
from release.project.targetsenv import targets_variable
from release.targets import target_problem


def logged_cause(log: Path, cell: Cell) -> str | None:
    """Where the build log shows compile lines with the project's own arch flags (a build
    whose compiles the wrapper did not see): the cause and the two ways out, for the
    inspection's message."""
    hints = backend_for(cell.build.backend).arch_hints
    if hints is None:
        return None
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    stop = stop_in_log(text, cell_request(cell.sms, cell.ptx), cuda_major=cell.cuda.major)
    if stop is None:
        return None
    return (
        f"the build log shows the project's own arch flags ({stop.source} compiled with "
        f"{' '.join(stop.flags)}: {stop.asked.describe()}): {hints.cause}; set the cell's "
        f"targets to what the project builds ({matrix_targets(stop.asked)}), or {hints.honour}"
    )


def arch_failure(stop_record: Path, cell: Cell) -> CellFailure | None:
    """The cell's failure where its compile wrapper stopped the build (the record it wrote
    at `stop_record`), with the cause and the two ways out."""
    hints = backend_for(cell.build.backend).arch_hints
    try:
        stop = Stop.from_json(stop_record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if hints is None:
        return None
    message = stop_message(stop, hints, remedy_problem=remedy_problem(stop, cell))
    read = None if cell.build.targets_env else project_setup_py(cell)
    if read is not None and (own := targets_variable(read[1])) is not None:
        message += (
            f"\n  or hand the cell's sms to {own.name} ({own.place}), which the project's flags "
            f"follow: {own.matrix_key} in matrix.yaml"
        )
    if read is not None and (mapped := flags_from_arch_list(read[1])) is not None:
        message += (
            f"\n  ({mapped.place} makes its flags from the cell's {hints.variable} itself, "
            "through a mapping of its own: the targets above are what it builds for the "
            "cell's list, and a cell that asks for them gets them)"
        )
    return CellFailure(message)


def project_setup_py(cell: Cell) -> tuple[Path, SetupPy] | None:
    """The project file the cell's backend reads its flags from (a torch project's
    setup.py), read as init reads it, with its path (None: the backend names none, or it
    cannot be read)."""
    hints = backend_for(cell.build.backend).arch_hints
    if hints is None or hints.literal_source is None:
        return None
    path = cell.project.path / hints.literal_source
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return path, read_setup_py(text, hints.literal_source)


def remedy_problem(stop: Stop, cell: Cell) -> str | None:
    """Why the matrix cannot give the cell exactly the targets the project builds."""
    if stop.asked.unknown:
        return f"{', '.join(stop.asked.unknown)} names no list of targets"
    if len(stop.asked.ptx) > 1:
        return "a cell holds one PTX target, the project's flags give " + ", ".join(
            t.compute for t in sorted(stop.asked.ptx)
        )
    ptx = min(stop.asked.ptx) if stop.asked.ptx else None
    sms = sorted(stop.asked.cubins)
    problems = [target_problem(t, cell.cuda) for t in [*sms, *([ptx] if ptx else [])]]
    problems.append(backend_for(cell.build.backend).targets_problem(sms, ptx))
    found = [p for p in problems if p is not None]
    return "; ".join(dict.fromkeys(found)) if found else None
