"""The latest final release on each destination of the release, asked read-only: what every
nightly version must sort above (release.nightly.promotion.order_problems).

Each destination's kind says which versions it released (release.destinations: PyPI, any
simple index, by its project page, PEP 691 JSON or PEP 503 HTML, a page that is not there
being a project with no release yet; GitHub by the tags of its published releases, read with
the destination's tag template). A destination that cannot be asked is named with why,
never taken for one without releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import Version

from release.destinations.reach import Reach
from release.destinations.registry import index_auth, kind_of
from release.errors import PublishError
from release.matrix import Cell, Matrix
from release.nightly.promotion import FinalRelease, latest_final
from release.remote.httpclient import Client
from release.remote.retry import RetryPolicy

ASKING = RetryPolicy(attempts=3, initial_delay=1.0, total=60.0)


@dataclass(frozen=True, kw_only=True)
class Finals:
    releases: tuple[FinalRelease, ...]  # one per destination that has a final release
    not_asked: tuple[str, ...]  # "pypi: why", for each destination that could not be asked


def variant_of(cells: Sequence[Cell], version: Version) -> str:
    """What pip would install of `version` from the destination of `cells`."""
    cudas = ", ".join(dict.fromkeys(str(c.cuda) for c in cells))
    label = cells[0].local_label
    shown = f"{version.public}+{label}" if label else version.public
    return f"{shown} (the CUDA {cudas} variant)"


def read_finals(matrix: Matrix, reach: Reach, *, http: Client | None = None) -> Finals:
    """The latest final release on each destination the release's cells go to (`matrix`
    is the release's, not a nightly's), as each destination's kind reads its releases."""
    by_destination: dict[str, list[Cell]] = {}
    for cell in matrix.cells:
        for copy in cell.copies:  # each place a cell's wheel goes, with its label there
            by_destination.setdefault(copy.destination.name, []).append(cell.as_copy(copy))
    releases: list[FinalRelease] = []
    not_asked: list[str] = []
    own = http is None
    client = http or reach.http(index_auth(matrix.destinations.values(), reach))
    try:
        for name, cells in by_destination.items():
            destination = cells[0].destination
            kind = kind_of(destination.kind)
            try:
                versions = kind.released_versions(
                    destination, matrix.project.name, reach, client, ASKING
                )
            except PublishError as error:
                not_asked.append(f"{name}: {error.message}")
                continue
            found = latest_final(versions)
            if found is not None:
                releases.append(
                    FinalRelease(
                        destination=f"{name} ({destination.kind})",
                        version=found,
                        variant=variant_of(cells, found),
                    )
                )
    finally:
        if own:
            client.close()
    return Finals(releases=tuple(releases), not_asked=tuple(not_asked))


def finals_lines(finals: Finals) -> list[str]:
    """The report's lines on the version order a nightly must sort above."""
    if not finals.releases:
        return ["version order: no final release on the release's destinations yet"]
    return [f"latest final release on {f.destination}: {f.version.public}" for f in finals.releases]
