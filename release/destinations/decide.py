"""The one decision of what publishing does with each file, through the publisher seam
(release.destinations.base.Publisher).

`decide` is the whole policy, used by `release plan`, `release publish --dry-run` and
`release publish` alike: a file the destination lacks is uploaded, the same bytes are
skipped, other bytes under the same name are a CONFLICT (replaced only when asked), a
leftover of a failed upload is cleared and uploaded again, and a file that breaks a
destination rule is refused before anything is sent anywhere, as is, as a whole, a release
that would take the project past the destination's size limit. Companions (the PEP 658
`.metadata` of a wheel, the NCCL files, the release manifest) follow the same rule.

`plan_for` asks a destination's publisher what it holds (read-only) and decides every
file; `release publish` then stages every destination that can, commits those that cannot
stage, then the staged ones: nothing goes public until every destination holds its files.
With `--build-tag`, a CONFLICT wheel is decided again as the next build of its name
(release.destinations.buildtag): its decision then says which name it was built under.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from release.inspection.budget import ProjectLoad, project_refusal
from release.records.dist import wheel_problem
from release.records.manifest import SHA256_HEX, WheelEntry

if TYPE_CHECKING:
    from release.destinations.base import Publisher


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
    NOT_ASKED = "not asked"  # a dry run could not reach the destination


@dataclass(frozen=True, kw_only=True)
class FileDecision:
    entry: WheelEntry
    action: Action
    reason: str
    url: str  # where the file will be (or is) downloadable once published
    # the name it was built under, where `entry` is that wheel as the next build of its name
    # (`--build-tag`: the destination holds other bytes under the built name)
    rebuilt_from: str | None = None


@dataclass(frozen=True, kw_only=True)
class Companion:
    """A file published beside the wheels: a wheel's `.metadata`, an NCCL file, the
    release manifest. Its bytes are known before publishing."""

    filename: str
    data: bytes
    sha256: str
    of: str  # the wheel it describes, or "release"
    purpose: str  # "PEP 658 metadata", "NCCL uv override", ...
    refusal: str | None = None  # why its destination would reject it (the sdist on PyPI)
    # a record of the whole release (release-manifest.json), written again where build tags
    # change what it lists
    record: bool = False

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, kw_only=True)
class CompanionDecision:
    companion: Companion
    action: Action
    reason: str
    url: str


@dataclass(frozen=True, kw_only=True)
class PublishPlan:
    decisions: tuple[FileDecision, ...]
    companions: tuple[CompanionDecision, ...] = field(default=())
    frozen: str | None = None  # why nothing can be added or replaced there (immutable)
    # why the destination as a whole refuses the release (its project size limit), if it does
    budget: str | None = None

    def with_action(self, *actions: Action) -> tuple[FileDecision, ...]:
        return tuple(d for d in self.decisions if d.action in actions)

    def companions_with(self, *actions: Action) -> tuple[CompanionDecision, ...]:
        return tuple(c for c in self.companions if c.action in actions)

    @property
    def blocked(self) -> bool:
        """True when any file is a conflict or refused: then nothing at all is uploaded."""
        bad = (Action.CONFLICT, Action.REFUSED)
        return bool(self.with_action(*bad) or self.companions_with(*bad) or self.budget)

    @property
    def unasked(self) -> bool:
        return bool(self.with_action(Action.NOT_ASKED))


def verdict(
    sha256: str,
    size: int,
    remote: RemoteFile | None,
    *,
    refusal: str | None,
    replace: bool,
    url: str,
    frozen: str | None = None,
) -> tuple[Action, str, str]:
    """(action, reason, URL) for one file: the URL is the destination's own where it keeps
    the file it holds, else `url`, where the file goes. `frozen` says why the destination
    takes no new or other bytes at all (an immutable release)."""
    if refusal is not None:
        return Action.REFUSED, refusal, url
    if remote is None or remote.state != "uploaded":
        reason = "new" if remote is None else f"leftover of a failed upload ({remote.state})"
        if frozen is not None:
            return Action.REFUSED, f"{reason}, but {frozen}: nothing can be added", url
        return Action.UPLOAD, reason, url
    if remote.sha256 == sha256 and remote.size in (None, size):
        return Action.SKIP, "same sha256" + (f" ({frozen})" if frozen else ""), remote.url
    if remote.sha256 is None:
        reason = "exists, and the destination reports no sha256 to compare"
    elif not SHA256_HEX.fullmatch(remote.sha256):  # the server's text: cut short, quoted
        reason = f"exists, and the destination lists {remote.sha256[:16]!r}, which is no sha256"
    else:
        reason = f"exists with sha256 {remote.sha256[:12]}..., built {sha256[:12]}..."
    if frozen is not None:
        return Action.CONFLICT, f"{reason}; {frozen}: it cannot be replaced", remote.url
    if replace:
        return Action.REPLACE, reason, url
    return Action.CONFLICT, reason, remote.url


def decide(
    entry: WheelEntry,
    remote: RemoteFile | None,
    *,
    refusal: str | None,
    replace: bool,
    url: str,
    frozen: str | None = None,
) -> FileDecision:
    """What to do with one wheel, from what its destination already has."""
    action, reason, where = verdict(
        entry.sha256, entry.size, remote, refusal=refusal, replace=replace, url=url, frozen=frozen
    )
    return FileDecision(entry=entry, action=action, reason=reason, url=where)


def decide_companion(
    companion: Companion,
    remote: RemoteFile | None,
    *,
    replace: bool,
    url: str,
    frozen: str | None = None,
) -> CompanionDecision:
    action, reason, where = verdict(
        companion.sha256,
        companion.size,
        remote,
        refusal=companion.refusal,
        replace=replace,
        url=url,
        frozen=frozen,
    )
    return CompanionDecision(companion=companion, action=action, reason=reason, url=where)


def plan_for(
    publisher: Publisher,
    entries: Sequence[WheelEntry],
    dist: Path,
    *,
    replace: bool,
    companions: Sequence[Companion] = (),
    can_replace: bool = True,
    rewrite_records: bool = False,
) -> PublishPlan:
    """Ask the destination (read-only) and decide every file and companion. A wheel in
    `dist` that is not the built one is refused; `replace` re-hashes what the destination
    holds from its bytes (an asset whose reported digest is right while its bytes are not
    is then found) and replaces what differs where the destination allows it;
    `rewrite_records` replaces a record of the release (`Companion.record`) that differs,
    and nothing else (the wheels of `entries` carry build tags the record must list)."""
    files = {e.filename: e.size for e in entries} | {c.filename: c.size for c in companions}
    remote = publisher.existing(files, rehash=replace and can_replace)
    frozen = publisher.frozen
    decisions = []
    for entry in entries:
        wheel = dist / entry.filename
        refusal = wheel_problem(entry, wheel) or publisher.refusal(entry, wheel)
        decisions.append(
            decide(
                entry,
                remote.get(entry.filename),
                refusal=refusal,
                replace=replace and can_replace,
                url=publisher.final_url(entry.filename),
                frozen=frozen,
            )
        )
    load = None
    limit = entries[0].destination.max_project_size if entries else None
    if limit is not None:
        load = ProjectLoad(
            destination=publisher.name,
            limit=limit,
            wheels=tuple(entries),
            other_bytes=sum(c.size for c in companions),
            held=publisher.held_bytes(files),
        )
    return PublishPlan(
        frozen=frozen,
        budget=None if load is None else project_refusal(load),
        decisions=tuple(decisions),
        companions=tuple(
            decide_companion(
                c,
                remote.get(c.filename),
                replace=(replace or (rewrite_records and c.record)) and can_replace,
                url=publisher.final_url(c.filename),
                frozen=frozen,
            )
            for c in companions
        ),
    )
