"""What keeps a cell's GPU targets from reaching a project's build, as `release init` (its
changes) and `release build --dry-run` / `release doctor` (their warnings) both say it, in
the same words: a TORCH_CUDA_ARCH_LIST that setup.py sets over the cell's, and nvcc
`-gencode` flags a project file hard-codes; and `-gencode` flags a setup.py makes itself from
the TORCH_CUDA_ARCH_LIST each cell passes (SageAttention's), which need no change but a
check of its own mapping. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from release.project.cudagate import ARCH_LIST
from release.project.places import ProjectChange, lines_said
from release.project.setuppy import Gencode, SetupPy


def arch_list_changes(setup_py: SetupPy) -> list[ProjectChange]:
    return [
        ProjectChange(
            place=d.place,
            text="sets TORCH_CUDA_ARCH_LIST over the one each cell passes: the matrix's sms "
            "never reach the build",
            fix='make it a default: os.environ.setdefault("TORCH_CUDA_ARCH_LIST", ...)',
        )
        for d in setup_py.arch_list
        if d.overrides
    ]


def gencode_change(flags: Sequence[Gencode], takes: tuple[str, str]) -> ProjectChange:
    """Hard-coded -gencode flags: the build compiles them `takes[1]` (instead of, beside)
    the variable `takes[0]` that carries the cell's targets."""
    variable, instead = takes
    return ProjectChange(
        place=flags[0].place,
        text=f"hard-codes nvcc's -gencode flags ({_lines_of(flags)}): the build compiles them "
        f"{instead} the {variable} each cell passes, so the matrix's sms do not decide the "
        "wheel's",
        fix=f"take them out, so that the matrix's sms reach the build as {variable}",
    )


def flags_from_arch_list(setup_py: SetupPy) -> ProjectChange | None:
    """Where every -gencode flag of setup.py is computed and the file reads
    TORCH_CUDA_ARCH_LIST itself: the flags follow the list each cell passes, through a
    mapping of the project's own, which init cannot evaluate (a check, not a change)."""
    reads = [r for r in setup_py.env_reads if r.name == ARCH_LIST]
    flags = setup_py.gencode
    if not flags or not reads or any(f.cubins or f.ptx for f in flags):
        return None
    return ProjectChange(
        place=flags[0].place,
        text=f"makes its -gencode flags ({_lines_of(flags)}) from the {ARCH_LIST} each cell "
        f"passes, which it reads itself ({reads[0].place}): its own mapping decides each cubin and "
        "PTX, and may leave an SM out or build another one for it (sm_90a for 9.0)",
        fix="check that it builds the matrix's sms: a cell whose compile flags differ stops "
        "at its first compile and names the sms and ptx to write",
    )


def _lines_of(flags: Sequence[Gencode]) -> str:
    return lines_said([f.place.line for f in flags if f.place.line is not None])


def torch_arch_changes(setup_py: SetupPy, takes: tuple[str, str]) -> list[ProjectChange]:
    """Every change of a torch project's setup.py about its GPU targets, in file order
    (`takes`: gencode_change's)."""
    changes = arch_list_changes(setup_py)
    if setup_py.gencode and flags_from_arch_list(setup_py) is None:
        changes.append(gencode_change(setup_py.gencode, takes))
    return changes
