"""The publisher seam: what a destination has, and the pure decision of what to do per file.

`decide` is the whole policy: a file the destination lacks is uploaded, the same bytes are
skipped, other bytes under the same name are a CONFLICT (replaced only when asked), and a
file that breaks a destination rule is refused before anything is sent anywhere.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from release.manifest import WheelEntry


@dataclass(frozen=True, kw_only=True)
class RemoteFile:
    """A file as a destination reports it (read-only requests only)."""

    name: str
    size: int | None
    sha256: str | None
    url: str
    state: str = "uploaded"  # GitHub asset state; anything else is a failed upload's leftover


class Action(enum.Enum):
    UPLOAD = "upload"
    SKIP = "identical"
    REPLACE = "replace"
    CONFLICT = "CONFLICT"
    REFUSED = "refused"


@dataclass(frozen=True, kw_only=True)
class FileDecision:
    entry: WheelEntry
    action: Action
    reason: str
    url: str  # where the file will be (or is) downloadable once published


@dataclass(frozen=True, kw_only=True)
class PublishPlan:
    decisions: tuple[FileDecision, ...]

    def with_action(self, *actions: Action) -> tuple[FileDecision, ...]:
        return tuple(d for d in self.decisions if d.action in actions)

    @property
    def blocked(self) -> bool:
        """True when any file is a conflict or refused: then nothing at all is uploaded."""
        return bool(self.with_action(Action.CONFLICT, Action.REFUSED))


def decide(
    entry: WheelEntry,
    remote: RemoteFile | None,
    *,
    refusal: str | None,
    replace: bool,
    url: str,
) -> FileDecision:
    """What to do with one file, from what its destination already has."""
    if refusal is not None:
        return FileDecision(entry=entry, action=Action.REFUSED, reason=refusal, url=url)
    if remote is None or remote.state != "uploaded":
        reason = "new" if remote is None else f"leftover of a failed upload ({remote.state})"
        return FileDecision(entry=entry, action=Action.UPLOAD, reason=reason, url=url)
    if remote.sha256 == entry.sha256 and remote.size in (None, entry.size):
        return FileDecision(entry=entry, action=Action.SKIP, reason="same sha256", url=remote.url)
    if remote.sha256 is None:
        reason = "exists, and the destination reports no sha256 to compare"
    else:
        reason = f"exists with sha256 {remote.sha256[:12]}..., built {entry.sha256[:12]}..."
    if replace:
        return FileDecision(entry=entry, action=Action.REPLACE, reason=reason, url=url)
    return FileDecision(entry=entry, action=Action.CONFLICT, reason=reason, url=remote.url)


class Publisher(Protocol):
    """One destination. Implementations: PyPI (twine) and GitHub Releases (githubkit)."""

    name: str

    def existing(self, entries: Sequence[WheelEntry]) -> Mapping[str, RemoteFile]:
        """What the destination already has under these filenames. Read-only requests."""
        ...

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        """Why the destination would reject this file, checked before any upload."""
        ...

    def final_url(self, entry: WheelEntry) -> str:
        """Where the file will be downloadable once published."""
        ...

    def apply(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        """Carry out the plan (uploads, replacements, publishing a draft); return the
        decisions with the final URLs as the destination reports them afterwards."""
        ...


def plan_for(
    publisher: Publisher, entries: Sequence[WheelEntry], dist: Path, *, replace: bool
) -> PublishPlan:
    """Ask the destination (read-only) and decide every file."""
    remote = publisher.existing(entries)
    return PublishPlan(
        decisions=tuple(
            decide(
                entry,
                remote.get(entry.filename),
                refusal=publisher.refusal(entry, dist / entry.filename),
                replace=replace,
                url=publisher.final_url(entry),
            )
            for entry in entries
        )
    )
