"""A rebuilt wheel published under the next build tag of its name, beside the bytes a
destination already holds under that name (`release publish --build-tag`), never in their
place: whoever pinned the old URL and its sha256 keeps getting exactly those bytes.

Where a destination holds other bytes under a wheel's filename (a CONFLICT), the wheel is
rewritten as build N of that name (`k3_kernels-0.1.0-1-py3-none-....whl`: the filename's
build tag and WHEEL's `Build:` line, by release.wheelrewrite.with_build_tag), N one above the
highest build the destination holds of the same wheel (pip and uv install the highest build
tag of a version: the new bytes must sort above every older build). The same wheel is
compared by value, never by spelling: its normalised project name, its version as PEP 440
reads it (`0.1+cu129` is `0.1.0+cu129`) and a tag in common, with each build tag as pip
reads it (`-07-` is 7, `-5a-` is (5, "a"), above 5). It is decided as any file is:
uploaded, or identical where the destination already holds these very bytes under a build of
the name (a re-run from the same build: the rewrite is deterministic), or refused.

`next_build` is the choice, pure; `rebuilt_decision` asks the destination (read-only
requests) and writes the rewritten wheel into a scratch directory, where plan and publish
check it as they check a wheel in dist/.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from release.destinations.decide import Action, FileDecision, PublishPlan, RemoteFile, decide
from release.errors import PublishError
from release.records.dist import wheel_problem
from release.records.manifest import WheelEntry
from release.wheelfile import NotAWheel, WheelName, wheel_name_or_none
from release.wheelrewrite import with_build_tag

if TYPE_CHECKING:
    from release.destinations.base import Publisher

MAX_BUILD = 999  # builds of one name asked for; past it, a new version is the answer
UNKNOWN_SIZE = -1  # asking for names alone: no size matches, so nothing is downloaded


@dataclass(frozen=True, kw_only=True)
class Rebuilt:
    """A wheel the destination holds other bytes of under its name, as it is published."""

    built: str  # the name it was built under, which the destination holds other bytes under
    entry: WheelEntry  # the build-tagged wheel: its filename, size and sha256
    path: Path  # its bytes (a scratch file until publish writes it into dist/)


def rebuilt_reason(tagged: str, built: str, reason: str) -> str:
    """The reason of a rebuilt wheel's decision: `as NAME-1-... (rebuilt: ...)`, with what
    the decision of the tagged name said where it said more than `new`."""
    said = "" if reason == "new" else f", {reason}"
    return f"as {tagged}{said} (rebuilt: the destination holds other bytes under {built})"


def next_build(
    held: Mapping[int, RemoteFile],
    sha256_of: Callable[[int], str],
    *,
    after: int = 0,
    above: int = 0,
) -> tuple[int, bool]:
    """(N, identical): the build number to publish under and whether the destination holds
    these bytes under it already. `held` is what it holds under each build number of the
    name, `sha256_of(N)` the sha256 of the wheel rewritten as build N, `after` the build
    number the wheel was built with (0: none), `above` the number of the highest build of
    the same wheel held under any spelling (`held_builds`). The highest build holding the
    same bytes wins; else one above the highest build holding any (a failed upload's
    leftover holds none); past MAX_BUILD, a PublishError: a new version is the answer."""
    for number in sorted(held, reverse=True):
        remote = held[number]
        if remote.state == "uploaded" and remote.sha256 == sha256_of(number):
            return number, True
    taken = [number for number, remote in held.items() if remote.state == "uploaded"]
    highest = max([*taken, after, above])
    if highest >= MAX_BUILD:
        raise PublishError(
            f"a rebuild must go above build {highest} of its wheel, which the destination "
            f"holds, and {MAX_BUILD} is the last build number this tool gives",
            hint="release a new version",
        )
    return highest + 1, False


def held_builds(wheel: WheelName, held: Iterable[str]) -> int:
    """The number of the highest build of `wheel` among the files `held` (0: none), each
    name read by value: the same project, the same version and a tag in common is the same
    wheel to pip, which then installs the highest build tag, whatever the spelling. A build
    `5a` sorts above 5 and below 6: 5 is returned, and the next build is 6."""
    numbers = [0]
    for name in held:
        other = wheel_name_or_none(name)
        if other is not None and other.build and wheel.is_pip_same(other):
            numbers.append(other.build[0])
    return max(numbers)


def rebuilt_decision(
    publisher: Publisher, decision: FileDecision, dist: Path, scratch: Path
) -> tuple[FileDecision, Rebuilt | None]:
    """The decision of a CONFLICT wheel as the next build of its name (read-only requests;
    the rewritten wheel is written into `scratch`), or the CONFLICT as it was, its reason
    saying why, where the wheel cannot be given a build tag."""
    entry = decision.entry
    try:
        data = (dist / entry.filename).read_bytes()
        name = WheelName.parse(entry.filename)
        tagged = _Tagger(entry.filename, data)
        after = name.build[0] if name.build else 0
        candidates = {
            name.with_build((number, "")).filename: number
            for number in range(after + 1, MAX_BUILD + 1)
        }
        found = publisher.existing(dict.fromkeys(candidates, UNKNOWN_SIZE), rehash=False)
        held = {candidates[file]: remote for file, remote in found.items()}
        unknown = [n for n, r in held.items() if r.state == "uploaded" and r.sha256 is None]
        if unknown:  # the destination reports no digest: compare the bytes of the same size
            sized = {tagged.name(n): len(tagged.data(n)) for n in unknown}
            again = publisher.existing(sized, rehash=False)
            held.update({candidates[file]: remote for file, remote in again.items()})
        above = held_builds(name, publisher.held_files())
        number, _ = next_build(held, tagged.sha256, after=after, above=above)
        path = scratch / tagged.name(number)
        path.write_bytes(tagged.data(number))
    except (NotAWheel, OSError) as why:
        reason = f"{decision.reason}; no build tag: {why}"
        return replace(decision, reason=reason), None
    size, sha256 = len(tagged.data(number)), tagged.sha256(number)
    rebuilt = Rebuilt(
        built=entry.filename,
        entry=replace(entry, filename=path.name, size=size, sha256=sha256),
        path=path,
    )
    remote = held.get(number)
    refusal = wheel_problem(rebuilt.entry, path) or publisher.refusal(rebuilt.entry, path)
    made = decide(
        rebuilt.entry,
        remote,
        refusal=refusal,
        replace=False,
        url=publisher.final_url(path.name),
        frozen=publisher.frozen,
    )
    return marked(made, entry.filename), rebuilt


def marked(decision: FileDecision, built: str) -> FileDecision:
    """`decision` (of a build-tagged wheel) said as the rebuild of `built` it is."""
    reason = rebuilt_reason(decision.entry.filename, built, decision.reason)
    return replace(decision, rebuilt_from=built, reason=reason)


def with_build_tags(
    publisher: Publisher, plan: PublishPlan, dist: Path, scratch: Path
) -> tuple[PublishPlan, dict[str, Rebuilt]]:
    """`plan` with each CONFLICT wheel decided as the next build of its name, and those
    wheels by the name they were built under. Nothing changes where the destination takes
    no new file at all (an immutable release)."""
    if plan.frozen is not None or publisher.frozen is not None:
        return plan, {}
    decisions: list[FileDecision] = []
    rebuilt: dict[str, Rebuilt] = {}
    for decision in plan.decisions:
        if decision.action is not Action.CONFLICT:
            decisions.append(decision)
            continue
        made, wheel = rebuilt_decision(publisher, decision, dist, scratch)
        decisions.append(made)
        if wheel is not None:
            rebuilt[wheel.built] = wheel
    return replace(plan, decisions=tuple(decisions)), rebuilt


class _Tagger:
    """The wheel rewritten as each build number asked for, each made once."""

    def __init__(self, filename: str, data: bytes) -> None:
        self._filename = filename
        self._source = data
        self._made: dict[int, tuple[str, bytes]] = {}

    def _get(self, number: int) -> tuple[str, bytes]:
        if number not in self._made:
            name, data = with_build_tag(self._filename, self._source, number)
            self._made[number] = (name.filename, data)
        return self._made[number]

    def name(self, number: int) -> str:
        return self._get(number)[0]

    def data(self, number: int) -> bytes:
        return self._get(number)[1]

    def sha256(self, number: int) -> str:
        return hashlib.sha256(self.data(number)).hexdigest()
