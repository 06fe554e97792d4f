"""The project-size budget of a destination: what the project will hold there once this
release is published, against the most the destination lets one project hold (PyPI: 10 GiB
unless it raised the project's limit).

Pure: `release build` warns from 90% (`project_warning`), `release plan` and `release
publish` refuse past 100% before anything is uploaded (`project_refusal`), each naming the
wheels, and in them the targets, that weigh most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from release.inspection.wheel import BUDGET_WARNING, heaviest
from release.records.manifest import WheelEntry


@dataclass(frozen=True, kw_only=True)
class ProjectLoad:
    """What one destination will hold of the project after this release."""

    destination: str
    limit: int
    wheels: tuple[WheelEntry, ...]  # this release's wheels there
    other_bytes: int = 0  # the other files this release sends there (.metadata, NCCL, ...)
    # what the destination holds of the project besides this release's files; None: not
    # learnt (then only this release's files are counted, and the message says so)
    held: int | None = None

    @property
    def sending(self) -> int:
        return sum(w.size for w in self.wheels) + self.other_bytes

    @property
    def total(self) -> int:
        return self.sending + (self.held or 0)


def size_text(size: int) -> str:
    """`9.31 GiB`, `12.4 MiB`, `812 bytes`: the unit a reader compares at a glance."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{size} bytes"


def heaviest_wheels(wheels: Sequence[WheelEntry], count: int = 3) -> str:
    """`a.whl 3.10 GiB (sm_100 1.2 MiB, ...), b.whl ...`: the wheels that weigh most."""
    ranked = sorted(wheels, key=lambda w: (-w.size, w.filename))[:count]
    parts = []
    for wheel in ranked:
        targets = heaviest(wheel.device_bytes)
        parts.append(
            f"{wheel.filename} {size_text(wheel.size)}" + (f" ({targets})" if targets else "")
        )
    return ", ".join(parts)


def _counted(load: ProjectLoad) -> str:
    what = f"this release's {len(load.wheels)} wheel(s)"
    if load.other_bytes:
        what += " and their companion files"
    what += f" ({size_text(load.sending)})"
    if load.held is None:
        return what + f"; what {load.destination} already holds is not known and not counted"
    return what + f" plus the {size_text(load.held)} {load.destination} already holds"


def project_refusal(load: ProjectLoad) -> str | None:
    """Why the release would take the project past the destination's project limit."""
    if load.total <= load.limit:
        return None
    total, limit = size_text(load.total), size_text(load.limit)
    if total == limit:  # rounded alike: the bytes say which is more
        total, limit = f"{total} ({load.total} bytes)", f"{limit} ({load.limit} bytes)"
    return (
        f"{load.destination}: the project would hold {total}, over its "
        f"{limit} project limit: {_counted(load)}; heaviest: "
        f"{heaviest_wheels(load.wheels)} (drop SMs with `exclude` in matrix.yaml, or ask "
        f"{load.destination} for a raised project limit and set `max-project-size-gib`)"
    )


def project_warning(load: ProjectLoad) -> str | None:
    """Where the release takes the project near, but not past, its project limit."""
    if not BUDGET_WARNING * load.limit < load.total <= load.limit:
        return None
    return (
        f"{load.destination}: the project would hold {size_text(load.total)}, "
        f"{100 * load.total / load.limit:.0f}% of its {size_text(load.limit)} project limit: "
        f"{_counted(load)}; heaviest: {heaviest_wheels(load.wheels)}"
    )


def release_loads(wheels: Sequence[WheelEntry]) -> list[ProjectLoad]:
    """This release's wheels by destination, for each destination with a project limit
    (what the destinations hold already is not asked: `release build` reads no network)."""
    groups: dict[str, list[WheelEntry]] = {}
    for wheel in wheels:
        groups.setdefault(wheel.destination.name, []).append(wheel)
    return [
        ProjectLoad(destination=name, limit=limit, wheels=tuple(group))
        for name, group in sorted(groups.items())
        if (limit := group[0].destination.max_project_size) is not None
    ]
