"""What matrix.yaml's `exclude` saved: for each SM an exclusion removed from a built cell,
the bytes that SM's device code weighs in a sibling cell of the same build that holds it
(the same CUDA version first, whose device code is the same; else the same CPU arch).
Pure: read from the cells' results, for `release build`'s report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from release.building.settings import CellResult
from release.targets import GpuTarget


@dataclass(frozen=True, kw_only=True)
class ExcludedSm:
    """One SM an exclusion removed from `cell`, weighed where a sibling has it."""

    cell: str
    sm: GpuTarget
    sibling: str | None = None  # the cell it was weighed in; None: no cell of the build has it
    sibling_bytes: int | None = None

    def line(self) -> str:
        """`12.9-aarch64: sm_75 excluded (its device code weighs 806 KiB in 12.9-x86_64)`."""
        if self.sibling is None or self.sibling_bytes is None:
            return f"{self.cell}: sm_{self.sm} excluded (not weighed: no cell of this build has it)"
        return (
            f"{self.cell}: sm_{self.sm} excluded (its device code weighs "
            f"{weight(self.sibling_bytes)} in {self.sibling})"
        )

    def as_json(self) -> dict[str, Any]:
        return {"sm": str(self.sm), "sibling": self.sibling, "sibling_bytes": self.sibling_bytes}


def weight(size: int) -> str:
    """`806 KiB` below a MiB, `1.2 MiB` from there on."""
    return f"{size / 1024:.0f} KiB" if size < 2**20 else f"{size / 2**20:.1f} MiB"


def excluded_sms(results: Sequence[CellResult]) -> list[ExcludedSm]:
    """Every SM an exclusion removed from a cell of `results`, in the cells' order."""
    weighed = [
        (r.cell, dict(r.report.device_bytes)) for r in results if r.ok and r.report is not None
    ]
    out: list[ExcludedSm] = []
    for result in results:
        cell = result.cell
        same_cuda = [(c, sizes) for c, sizes in weighed if c.cuda == cell.cuda and c != cell]
        same_arch = [(c, sizes) for c, sizes in weighed if c.arch == cell.arch and c != cell]
        for sm in cell.excluded_sms:
            label = f"sm_{sm}"
            holder = next(((c, s) for c, s in [*same_cuda, *same_arch] if label in s), None)
            if holder is None:
                out.append(ExcludedSm(cell=cell.id, sm=sm))
            else:
                sibling, sizes = holder
                out.append(
                    ExcludedSm(cell=cell.id, sm=sm, sibling=sibling.id, sibling_bytes=sizes[label])
                )
    return out
