"""The nightly channel's decisions, pure: what the state becomes when a run registers a commit
and when it completes one, which commit /nightly/ serves, what falls out of retention, and
whether a nightly version sorts above every final release.

- **Promotion** is by commit time (ties broken by the commit id), never by finishing order:
  a completed commit moves the pointer only when it is newer than the one there.
- **Retention** keeps the `keep` newest completed commits, every commit whose version a
  keep-list names, the commit being completed, the commit /nightly/ serves and the one it
  replaced (a reader of the page before the last promotion may still be downloading it);
  the rest fall out, to be archived or deleted. A registration no run completed within
  ABANDONED_AFTER falls out too (its files are deleted: nothing of it was verified).
- **Deletion** is decided afresh, never replayed: the state's pruning list only proposes;
  `deletions` drops from it every commit the state keeps or is uploading, the one being
  published, the pinned, the pointer and its previous, and whatever the /nightly/ pages
  link as read back from the bucket. A stored list that names any of them deletes nothing.
- **Version order**: every nightly version must sort above the latest final release on each
  destination of the release, or `pip install --pre` with the nightly index picks that
  release instead (a cu129 user would get PyPI's CUDA 13 wheel).

Every transition raises the generation by one: the state is written by compare-and-swap,
and the generation says which promotion wrote a /nightly/ page.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from release.matrix import Commit, Fallout
from release.nightly.state import (
    VERSION_FIELD,
    Kept,
    NightlyFile,
    NightlyState,
    Pointer,
    Pruning,
    Shape,
    Uploading,
)
from release.records.manifest import WheelEntry
from release.wheelfile import WheelName

ABANDONED_AFTER = 24 * 3600  # seconds a registration may wait for its run to complete it


def shape_of(entries: Sequence[WheelEntry], version: str) -> Shape:
    """The shape of a nightly's wheels (`version`: its public version, `0.1.1.dev1733212345`)."""
    base, dev, _ = version.rpartition(".dev")
    if not dev:
        raise ValueError(f"{version} is not a nightly version")
    wheels = []
    for entry in entries:
        wheel = WheelName.parse(entry.filename)
        file_version = str(wheel.version)
        if not file_version.startswith(version):
            raise ValueError(f"{entry.filename} is not of version {version}")
        field = f"-{VERSION_FIELD}{file_version[len(version) :]}-"
        wheels.append(wheel.filename.replace(f"-{file_version}-", field, 1))
    return Shape(base=base, wheels=tuple(sorted(wheels)))


def version_of(state: NightlyState, commit: Kept | Uploading | Pruning) -> Version:
    return Version(state.shapes[commit.shape].version(commit.time))


def _newer(a: tuple[int, str], b: tuple[int, str]) -> bool:
    return a > b


def _with_shape(state: NightlyState, shape: Shape) -> dict[str, Shape]:
    return {**state.shapes, shape.id: shape}


def registered(
    state: NightlyState, commit: Commit, shape: Shape, *, now: int
) -> NightlyState | None:
    """The state with `commit` registered as being uploaded; None where it is already
    kept or registered (a re-run: nothing to write)."""
    if state.kept_commit(commit.sha) or state.uploading_commit(commit.sha):
        return None
    entry = Uploading(commit=commit.sha, time=commit.time, shape=shape.id, started=now)
    return replace(
        state,
        generation=state.generation + 1,
        uploading=(*state.uploading, entry),
        shapes=_with_shape(state, shape),
    )


@dataclass(frozen=True, kw_only=True)
class Retention:
    keep: int
    pins: frozenset[Version]  # the keep-list: the matrix's and the bucket object's
    fallout: Fallout


def retained(
    state: NightlyState, kept: Sequence[Kept], rule: Retention, protected: Collection[str]
) -> tuple[tuple[Kept, ...], tuple[Kept, ...]]:
    """(kept, fallen): newest first, the `keep` newest plus the pinned and protected."""
    ordered = sorted(kept, key=lambda k: k.order, reverse=True)
    stay, fall = [], []
    for index, entry in enumerate(ordered):
        pinned = version_of(state, entry) in rule.pins
        if index < rule.keep or pinned or entry.commit in protected:
            stay.append(entry)
        else:
            fall.append(entry)
    return tuple(stay), tuple(fall)


def falls_out_at_once(state: NightlyState, commit: Commit, shape: Shape, rule: Retention) -> bool:
    """Whether `commit`, completed now, would fall out of retention at once: older than the
    `keep` newest kept and not pinned (nothing to publish it for)."""
    if Version(shape.version(commit.time)) in rule.pins:
        return False
    newer = [k for k in state.kept if _newer(k.order, (commit.time, commit.sha))]
    return len(newer) >= rule.keep


@dataclass(frozen=True, kw_only=True)
class Completion:
    state: NightlyState  # to write
    promoted: bool
    fallen: tuple[Pruning, ...]  # fell out now: the run prunes them once the state is written


def completed(
    state: NightlyState,
    *,
    commit: Commit,
    shape: Shape,
    files: Sequence[NightlyFile],
    pages: Mapping[str, str],
    rule: Retention,
    now: int,
    pruned: Collection[str] = (),
) -> Completion:
    """The state once `commit`'s whole matrix is uploaded and verified: kept, promoted where
    it is newer than what /nightly/ serves (`pages`: the MD5 of each /nightly/ page it
    gets), retention applied; `pruned`: commits whose pruning was confirmed, dropped from
    the state's list."""
    generation = state.generation + 1
    shapes = _with_shape(state, shape)
    entry = Kept(commit=commit.sha, time=commit.time, shape=shape.id)
    others = [k for k in state.kept if k.commit != commit.sha]
    uploading = [u for u in state.uploading if u.commit != commit.sha]
    pointer = state.nightly
    promoted = pointer is None or _newer(entry.order, (pointer.time, pointer.commit))
    if promoted:
        pointer = Pointer(
            commit=commit.sha,
            time=commit.time,
            version=shape.version(commit.time),
            generation=generation,
            previous=state.nightly.commit if state.nightly is not None else None,
            files=tuple(files),
            pages=dict(pages),
        )
    protected = {p for p in (pointer.commit, pointer.previous) if p} if pointer else set()
    protected.add(commit.sha)  # never deleted right after it was verified
    working = replace(state, shapes=shapes)
    stay, fall = retained(working, [*others, entry], rule, protected)
    abandoned = [u for u in uploading if now - u.started > ABANDONED_AFTER]
    fallen = tuple(
        Pruning(commit=k.commit, time=k.time, shape=k.shape, action=rule.fallout) for k in fall
    ) + tuple(
        Pruning(commit=u.commit, time=u.time, shape=u.shape, action="delete") for u in abandoned
    )
    uploading = [u for u in uploading if u not in abandoned]
    tracked = {k.commit for k in stay} | {u.commit for u in uploading}
    pruning = tuple(
        p for p in state.pruning if p.commit not in pruned and p.commit not in tracked
    ) + tuple(p for p in fallen if p.commit not in tracked)
    used = {k.shape for k in stay} | {u.shape for u in uploading} | {p.shape for p in pruning}
    new = replace(
        state,
        generation=generation,
        nightly=pointer,
        kept=stay,
        uploading=tuple(uploading),
        pruning=pruning,
        shapes={key: s for key, s in shapes.items() if key in used},
    )
    return Completion(state=new, promoted=promoted, fallen=fallen)


def deletions(
    state: NightlyState,
    *,
    publishing: str,
    pins: Collection[Version],
    served: Collection[str],
) -> tuple[tuple[Pruning, ...], tuple[tuple[Pruning, str], ...]]:
    """(what to delete now, what the pruning list names that must stay, with why): the
    state's pruning list recomputed against `state` as written, the commit being published,
    the keep-list's versions and the commits the /nightly/ pages link (`served`, read back)."""
    kept = {k.commit for k in state.kept}
    uploading = {u.commit for u in state.uploading}
    pointer = state.nightly
    linked = {pointer.commit, pointer.previous} if pointer is not None else set()
    delete: list[Pruning] = []
    spared: list[tuple[Pruning, str]] = []
    for entry in state.pruning:
        why = (
            "being published by this run" if entry.commit == publishing
            else "kept by the state" if entry.commit in kept
            else "being uploaded" if entry.commit in uploading
            else "the commit /nightly/ serves or replaced" if entry.commit in linked
            else "linked by a /nightly/ page" if entry.commit in served
            else "pinned by the keep-list" if version_of(state, entry) in pins
            else ""
        )  # fmt: skip
        if why:
            spared.append((entry, why))
        elif all(d.commit != entry.commit for d in delete):
            delete.append(entry)
    return tuple(delete), tuple(spared)


def settled(state: NightlyState, deleted: Collection[str]) -> NightlyState | None:
    """The state with the pruning of `deleted` done, and without pruning entries that name
    a commit it keeps or is uploading (they are not to be deleted); None: nothing changes."""
    tracked = {k.commit for k in state.kept} | {u.commit for u in state.uploading}
    pruning = tuple(p for p in state.pruning if p.commit not in deleted and p.commit not in tracked)
    if pruning == state.pruning:
        return None
    used = {k.shape for k in state.kept} | {u.shape for u in state.uploading}
    used |= {p.shape for p in pruning}
    return replace(
        state,
        generation=state.generation + 1,
        pruning=pruning,
        shapes={key: s for key, s in state.shapes.items() if key in used},
    )


def with_roots(state: NightlyState, labels: Collection[str]) -> NightlyState:
    return replace(state, roots=tuple(sorted(set(state.roots) | set(labels))))


# --- The version order. ---


@dataclass(frozen=True, kw_only=True)
class FinalRelease:
    """The latest final release on one destination of the release."""

    destination: str  # "pypi (pypi)"
    version: Version
    variant: str  # what pip would install of it: "the CUDA 13.0 wheel 0.1.0"


def order_problems(nightly: Version, finals: Sequence[FinalRelease]) -> list[str]:
    """Why the nightly `nightly` does not sort above every final release, one line each."""
    problems = []
    for final in finals:
        if Version(nightly.public) <= Version(final.version.public):
            problems.append(
                f"nightly {nightly.public} does not sort above {final.version.public}, the "
                f"latest final release on {final.destination}: `pip install --pre` with the "
                f"nightly index would pick {final.variant} instead"
            )
    return problems


def latest_final(versions: Collection[Version]) -> Version | None:
    """The highest final release among `versions`: neither a pre- nor a dev release (a
    post-release counts)."""
    finals = [v for v in versions if not v.is_prerelease and not v.is_devrelease]
    return max(finals, default=None)
