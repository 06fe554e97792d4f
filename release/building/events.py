"""What the build stage tells whoever runs it (`BuildEvents`): progress lines, warnings, the
toolchain downloads, each cell's start and end; silent unless a command says otherwise. A
module of its own that loads nothing of the stage, so that a command defines its events
without loading the build stage before it runs (`release build --help` loads none of it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from release.building.settings import CellResult
    from release.matrix import Cell
    from release.toolchain import Progress

CellProgress: TypeAlias = "Callable[[str, Cell, CellResult | None], None]"
"""("start" or "done", the cell, its result when done)."""


class BuildEvents:
    """What the stage tells whoever runs it; this one says nothing (the GPU gate's)."""

    def note(self, message: str) -> None:
        """A line of progress for a person."""

    def warning(self, message: str) -> None:
        """Something the user should act on; the build goes on."""

    @contextmanager
    def downloads(self) -> Iterator[Progress]:
        """Around provisioning: gets (what, bytes done, bytes in all) of each download."""
        yield lambda what, done, total: None

    def cells(self, total: int) -> AbstractContextManager[CellProgress]:
        """Around the cells' builds: hears each cell start and finish."""
        return _silent_cells()


@contextmanager
def _silent_cells() -> Iterator[CellProgress]:
    yield lambda event, cell, result: None
