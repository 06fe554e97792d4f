"""Which torch each GPU gate run of a torch cell's wheel runs beside, and why: a wheel whose
`Requires-Dist: torch` holds it to one series (`torch==2.14.*`, the regular ABI) beside the
torch it was built against; a libtorch stable-ABI wheel (`torch>=2.11`) beside the oldest
and the newest torch it admits on its cell's index for its CUDA major, each installed from
that index into an environment of the gate's (release.building.gate provisions it as a
build provisions the cell's own torch). Only running beside the oldest admitted torch shows
whether the headers the wheel was built with behave like that torch.

Pure: `besides` decides from the wheel's requirement and the index's releases; `plan_steps`
reads the wheels and the index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.building.torchpin import torch_requirement, within
from release.errors import ToolchainError, shown
from release.inspection.cudalibs import joined_torch_requirement, unparsed_requirements
from release.inspection.torchcuda import IndexTorches, TorchIndexes
from release.matrix import Cell, GateRun
from release.toolchain.buildenv import cell_targets
from release.wheelfile import read_wheel


@dataclass(frozen=True, kw_only=True)
class Beside:
    """The torch a run tests the wheel beside, and why that one."""

    torch: Version
    why: str

    def __str__(self) -> str:
        return f"torch {self.torch}: {self.why}"


@dataclass(frozen=True, kw_only=True)
class GateStep:
    """One run of the gate's command: a GateRun, beside one torch for a torch cell (or why
    that torch is not known)."""

    run: GateRun
    beside: Beside | None = None
    problem: str | None = None  # why the run cannot be made

    @property
    def cell(self) -> Cell:
        """The cell whose environment the run sees: the torch cell with the torch it runs
        beside (its own, or the one a stable-ABI wheel is tested beside)."""
        if self.beside is None or self.beside.torch == self.run.cell.torch:
            return self.run.cell
        return replace(self.run.cell, torch=self.beside.torch)

    @property
    def name(self) -> str:
        beside = f" beside torch {self.beside.torch}" if self.beside is not None else ""
        return f"{self.run.name}{beside}"


AdmittedReader = Callable[[Cell, SpecifierSet], IndexTorches]
_NO_WHEEL = "the dist's manifest records no wheel of {}: build it first"


def read_admitted(
    cell: Cell, specifier: SpecifierSet, indexes: TorchIndexes | None = None
) -> IndexTorches:
    """The releases of the cell's torch index that `specifier` admits, read through the
    gate's `indexes` (each index once; None: a reader of its own)."""
    index = (indexes or TorchIndexes()).of(cell.torch_index)
    return index.releases(cell.arch, specifier, python=cell_targets(cell).python)


def one_series(requirement: Requirement, torch: Version) -> bool:
    """Whether a wheel built against `torch` that requires `requirement` loads beside that
    torch's series only."""
    return within(requirement, torch_requirement(torch, None))


def besides(
    cell: Cell, torch: Version, requirement: Requirement, torches: IndexTorches | None
) -> tuple[Beside, ...]:
    """The torches the wheel of torch cell `cell`, built against `torch`, is tested beside
    (see the module doc); `torches`, the index's releases the requirement admits, is needed
    for a requirement wider than one series only. Raises ValueError where the index has
    none of the cell's CUDA major."""
    if torches is None or one_series(requirement, torch):
        why = f"built against it; the wheel requires {requirement}"
        return (Beside(torch=torch, why=why),)
    python = cell_targets(cell).python
    admitted = [
        b
        for b in torches.admitted_by(requirement.specifier, python)
        if b.built_for.major == cell.cuda.major
    ]
    if not admitted:
        raise ValueError(
            f"{requirement} admits no torch built for CUDA {cell.cuda.major} with a wheel for "
            f"Python {python} on {torches.index_url}"
        )
    oldest, newest = admitted[0], admitted[-1]
    where = f"on {torches.index_url}, built for {oldest.built_for}"
    first = Beside(
        torch=oldest.version, why=f"the oldest torch the wheel's {requirement} admits {where}"
    )
    if newest.version == oldest.version:
        return (first,)
    where = f"on {torches.index_url}, built for {newest.built_for}"
    last = Beside(
        torch=newest.version, why=f"the newest torch the wheel's {requirement} admits {where}"
    )
    return (first, last)


def wheel_requirement(wheel: Path, arch: str, python: str | None = None) -> Requirement:
    """The wheel's own requirement on torch on Linux `arch` under Python `python`: every
    `Requires-Dist: torch` line that applies (outside extras), joined. ValueError where
    its METADATA holds a line pip refuses, names torch by a URL, or requires no torch: a
    torch cell's wheel is released requiring the torch it loads beside, and without one
    the gate cannot know which torch to run it beside."""
    requires_dist = read_wheel(wheel).requires_dist
    if unparsed := unparsed_requirements(requires_dist):
        raise ValueError(
            f"{wheel.name}: METADATA's Requires-Dist {shown(unparsed[0])} is not PEP 508 "
            "(pip refuses to install the wheel)"
        )
    try:
        requirement = joined_torch_requirement(requires_dist, arch, python)
    except ValueError as error:
        raise ValueError(f"{wheel.name}: METADATA's {error}") from None
    if requirement is None:
        raise ValueError(
            f"{wheel.name} requires no torch on Linux {arch}: a torch cell's wheel requires "
            "the torch it loads beside (build it with release build)"
        )
    return requirement


def plan_steps(
    runs: Sequence[GateRun], wheels: Mapping[str, Path], read_index: AdmittedReader | None = None
) -> list[GateStep]:
    """Each run once per torch it runs beside (a cell without torch: once as it is). The
    torches of a cell are decided from its wheel in dist/ (`wheels`, by cell id), for its
    runs as built and PTX-only alike; each torch index is read once (`read_admitted`)."""
    indexes = TorchIndexes()
    reader = read_index or (lambda cell, specifier: read_admitted(cell, specifier, indexes))
    decided: dict[str, tuple[Beside, ...] | str] = {}
    steps = []
    for run in runs:
        cell = run.cell
        if cell.torch is None:
            wheel = wheels.get(cell.id)
            # the PTX-only wheel is the gate's own build; the wheel as built is dist/'s
            missing = run.build == "cubin" and (wheel is None or not wheel.is_file())
            steps.append(GateStep(run=run, problem=_NO_WHEEL.format(cell.id) if missing else None))
            continue
        if cell.id not in decided:
            decided[cell.id] = _decide(cell, cell.torch, wheels.get(cell.id), reader)
        found = decided[cell.id]
        if isinstance(found, str):
            steps.append(GateStep(run=run, problem=found))
            continue
        steps += [GateStep(run=run, beside=beside) for beside in found]
    return steps


def _decide(
    cell: Cell, torch: Version, wheel: Path | None, read_index: AdmittedReader
) -> tuple[Beside, ...] | str:
    if wheel is None or not wheel.is_file():  # its requirement decides: never guess one
        return _NO_WHEEL.format(cell.id)
    try:
        # the markers as pip reads them where the wheel installs: the cell's Python
        requirement = wheel_requirement(wheel, cell.arch, cell_targets(cell).python)
    except ValueError as error:
        return str(error)
    series = one_series(requirement, torch)
    if series and not requirement.specifier.contains(torch, prereleases=True):
        return (
            f"{wheel.name} requires {requirement}, which does not admit torch {torch}, the "
            "one it was built against: no torch is known to load it"
        )
    try:
        torches = None if series else read_index(cell, requirement.specifier)
        return besides(cell, torch, requirement, torches)
    except ToolchainError as error:
        return f"the torches {requirement} admits are not known: {error.message}"
    except ValueError as error:
        return str(error)
