"""`release plan`: every cell of the matrix, the wheel it makes, where that wheel goes, and
what the destination already holds under its name.

Pure core: the state of one file from the publisher seam's decision (`built_state`, the
same `decide` as `release publish`, and with `--build-tag` the same next build of a CONFLICT
wheel's name) or, for a cell not built yet, from what the destination lists
(`unbuilt_state`); each built wheel's growth since the previous release
(release.publish.growth); the verdict (`failure`). `make_plan` asks: the wheels in dist/
(checked against their manifest; a wheel an earlier `publish --build-tag` gave a build tag
is its cell's), the toolchain cache, and read-only requests to each destination through
the publishers. The command renders the plan.
"""

from __future__ import annotations

import enum
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from release.destinations.buildtag import with_build_tags
from release.destinations.decide import (
    Action,
    CompanionDecision,
    FileDecision,
    RemoteFile,
    plan_for,
)
from release.destinations.registry import kind_of
from release.downstream.nccl import OverrideFile, override_files
from release.errors import (
    ConfigError,
    ConflictError,
    IncompleteError,
    PublishError,
    ReleaseError,
    ToolchainError,
)
from release.matrix import Cell, GpuGate, GpuRunner
from release.publish.growth import NO_PREVIOUS, Growth, growth_by_wheel, growth_problem
from release.publish.run import PublisherFactory
from release.records.dist import load_dist, manifest_paths
from release.records.manifest import (
    DestinationRef,
    IndexRef,
    Manifest,
    WheelEntry,
    read_manifests,
    sdist_filename,
)
from release.records.release_manifest import PreviousRelease
from release.remote.gitindex import InTheWay
from release.toolchain import ToolchainPlan, present_dirs
from release.toolchain.buildenv import cell_plan, environment_of
from release.wheelfile import WheelName


class State(enum.Enum):
    NEW = "new"
    IDENTICAL = "identical (skip)"
    CONFLICT = "CONFLICT"
    REFUSED = "refused"
    ABSENT = "absent"
    PRESENT = "present (cannot compare: not built)"
    NOT_ASKED = "not asked"


@dataclass(frozen=True, kw_only=True)
class ToolchainVerdict:
    ok: bool
    text: str  # "nvcc from PyPI (nvidia-cuda-nvcc==13.0.88), provisioned" or the problem


@dataclass(frozen=True, kw_only=True)
class PlanRow:
    cell: str
    wheel: str
    built: bool
    size: int | None
    destination: str  # "pypi (pypi)"
    url: str  # where the file is, or will be, downloadable
    state: State
    reason: str
    toolchain: ToolchainVerdict
    growth: Growth | None = None  # against the previous release's wheel, where one matches
    published_as: str | None = None  # its name with a build tag, where it goes (or went) so


@dataclass(frozen=True, kw_only=True)
class GateLine:
    """One GPU runner of the gate and the runs it tests before publishing."""

    runner: GpuRunner
    runs: tuple[str, ...]


NO_GPU_GATE = (
    "no GPU gate ran: matrix.yaml names no GPU runners (gpu-gate), so no wheel of this "
    "release runs on a GPU before it is published"
)


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    project: str
    version: str
    rows: tuple[PlanRow, ...]
    nccl: tuple[OverrideFile, ...]
    problems: tuple[str, ...] = ()
    gate: tuple[GateLine, ...] = ()  # empty: no GPU gate
    previous: PreviousRelease | None = None
    previous_note: str = NO_PREVIOUS  # what the growth column compares against, or why nothing
    over_budget: tuple[str, ...] = ()  # destinations whose project limit the release passes
    too_grown: tuple[str, ...] = ()  # wheels over their destination's max-growth-percent
    sdist: PlanRow | None = None  # the release's sdist, where its cell is in the plan

    def with_state(self, *states: State) -> tuple[PlanRow, ...]:
        rows = (*self.rows, self.sdist) if self.sdist is not None else self.rows
        return tuple(r for r in rows if r.state in states)

    @property
    def missing_toolchains(self) -> tuple[PlanRow, ...]:
        return tuple(r for r in self.rows if not r.toolchain.ok)


def gate_lines(gate: GpuGate | None, cells: Sequence[Cell]) -> tuple[GateLine, ...]:
    if gate is None:
        return ()
    return tuple(
        GateLine(runner=runner, runs=tuple(run.name for run in gate.runs(runner, cells)))
        for runner in gate.runners
    )


def unbuilt_entry(cell: Cell) -> WheelEntry:
    """What the manifest would say about a cell before it is built: its name and
    destination; no size or digest yet."""
    return WheelEntry.of(
        cell, filename=cell.wheel_filename, size=0, sha256="", sms=(), ptx=None, toolchain={}
    )


def built_state(decision: FileDecision | CompanionDecision) -> tuple[State, str]:
    """A built file's state, from the publisher seam's decision (never with --replace); a
    rebuild going as the next build of its name says so (`upload as NAME-1-...`)."""
    states = {
        Action.UPLOAD: State.NEW,
        Action.SKIP: State.IDENTICAL,
        Action.CONFLICT: State.CONFLICT,
        Action.REFUSED: State.REFUSED,
        Action.REPLACE: State.CONFLICT,
    }
    state = states[decision.action]
    if isinstance(decision, FileDecision) and decision.rebuilt_from:
        upload = "upload " if decision.action is Action.UPLOAD else ""
        return state, upload + decision.reason
    reason = "" if decision.reason in ("new", "same sha256") else decision.reason
    return state, reason


def unbuilt_state(remote: RemoteFile | None) -> tuple[State, str]:
    if remote is None:
        return State.ABSENT, ""
    if remote.state != "uploaded":
        return State.ABSENT, f"leftover of a failed upload ({remote.state})"
    return State.PRESENT, ""


def tag_problems(cells: Sequence[Cell], version: str, tag: str) -> list[str]:
    """Why a pushed tag does not release this matrix's version, if it does not."""
    tags = sorted(
        {
            t
            for c in cells
            for copy in c.copies
            if (t := DestinationRef.of(c.as_copy(copy)).tag) is not None
        }
    )
    if tags:
        return [
            f"--expect-tag {tag}: the GitHub release of version {version} is tagged {t}"
            for t in tags
            if t != tag
        ]
    if tag.removeprefix("v") != version:
        return [f"--expect-tag {tag}: the matrix releases version {version}"]
    return []


def failure(plan: ReleasePlan) -> ReleaseError | None:
    """The error the plan ends with: conflicts first, then missing toolchains, refused
    files and a tag that does not match; None when the release can go ahead."""
    conflicts = plan.with_state(State.CONFLICT)
    missing = plan.missing_toolchains
    refused = plan.with_state(State.REFUSED)
    oversize = [*plan.over_budget, *plan.too_grown]
    parts = []
    if conflicts:
        parts.append(f"{len(conflicts)} CONFLICT ({', '.join(r.wheel for r in conflicts)})")
    if missing:
        parts.append(f"{len(missing)} missing toolchain ({', '.join(r.cell for r in missing)})")
    if refused:
        parts.append(f"{len(refused)} refused ({', '.join(r.wheel for r in refused)})")
    parts += oversize
    if conflicts:
        return ConflictError(
            "; ".join(parts),
            hint="a destination holds other bytes under the same filename: `release publish "
            "--build-tag` publishes a rebuilt wheel as the next build of its name (NAME-1-...whl; "
            "`release plan --build-tag` shows it), or bump the version before tagging "
            "(`release publish --replace` overwrites GitHub assets under their URLs)",
        )
    if missing:
        return ToolchainError(
            "; ".join(parts),
            hint="use a CUDA version with a known PyPI toolchain, or point --cuda-home at a "
            "toolkit; `release doctor` shows every toolchain",
        )
    if refused:
        return PublishError("; ".join(parts), hint="fix the refused files (reasons above)")
    if oversize:
        return PublishError(
            "; ".join(parts),
            hint="drop SMs with `exclude` in matrix.yaml, or raise the limit named above "
            "(`max-project-size-gib`, `max-growth-percent`) where the destination allows it",
        )
    if plan.problems:
        return ConfigError(plan.problems, hint="tag the version the matrix releases")
    unasked = plan.with_state(State.NOT_ASKED)
    if unasked:
        reasons = sorted({f"{r.destination}: {r.reason}" for r in unasked})
        return IncompleteError(
            f"{len([r for r in unasked if r is not plan.sdist])} wheel(s)"
            + (" and the sdist" if plan.sdist in unasked else "")
            + " not asked: "
            + "; ".join(reasons),
            hint="everything known locally is shown; set the credentials or reach the "
            "destination to see what it holds",
        )
    return None


Found = tuple[State, str, str, str | None]  # state, reason, URL, the name it goes as


def _ask(
    factory: PublisherFactory,
    destination: DestinationRef,
    entries: Sequence[WheelEntry],
    built: Mapping[str, WheelEntry],
    dist: Path,
    *,
    scratch: Path | None = None,
) -> tuple[dict[str, Found], str | None]:
    """(state, reason, URL, the name it goes as) of each file at one destination, from
    read-only requests: the built ones through the publisher seam's decision (with a
    `scratch` directory: a CONFLICT wheel as the next build of its name, `--build-tag`),
    the others by what is listed; and why the destination refuses the built ones as a whole
    (its project size limit)."""
    publisher = factory(destination)
    ready = [e for e in entries if e.filename in built]
    decided = plan_for(publisher, ready, dist, replace=False)
    if scratch is not None:
        decided = with_build_tags(publisher, decided, dist, scratch)[0]
    out: dict[str, Found] = {
        d.rebuilt_from or d.entry.filename: (
            *built_state(d), d.url, d.entry.filename if d.rebuilt_from else None,
        )
        for d in decided.decisions
    }  # fmt: skip
    waiting = {e.filename: 0 for e in entries if e.filename not in built}
    remote = publisher.existing(waiting, rehash=False) if waiting else {}
    for name in waiting:
        listed = remote.get(name)
        state, reason = unbuilt_state(listed)
        if state is State.ABSENT and publisher.frozen:
            state, reason = State.REFUSED, f"{publisher.frozen}: it cannot be added"
        elif state is State.ABSENT and publisher.taken:
            state, reason = State.REFUSED, publisher.taken
        url = publisher.final_url(name) if listed is None else listed.url
        out[name] = (state, reason, url, None)
    return out, decided.budget


def toolchain_verdicts(
    cells: Sequence[Cell], *, cuda_home: Path | None, cache: Path
) -> dict[str, ToolchainVerdict]:
    """Each cell's toolchain as `release build` would resolve it; nothing is installed."""
    out: dict[str, ToolchainVerdict] = {}
    for cell in cells:
        try:
            plan = cell_plan(cell, cuda_home=cuda_home, cache_dir=cache)
        except ToolchainError as error:
            out[cell.id] = ToolchainVerdict(ok=False, text=f"missing: {error.message}")
            continue
        if plan.device is None:
            nvcc = (plan.cuda_home or Path("/usr/local/cuda")) / "bin" / "nvcc"
            ok = nvcc.is_file()
            text = f"nvcc at {nvcc}" if ok else f"missing: {nvcc} does not exist"
            out[cell.id] = ToolchainVerdict(ok=ok, text=text)
            continue
        present = present_dirs([plan])
        state = "provisioned" if plan.install_dir(plan.device) in present else "from PyPI"
        text = f"{plan.device_compiler} {', '.join(plan.device.requirements)} ({state})"
        if cell.host_only and plan.device_compiler != "nvcc" and plan.libraries is not None:
            text = "none (no device code, no nvcc)"  # what it builds with is its CUDA_HOME
        out[cell.id] = ToolchainVerdict(ok=True, text=_with_environment(text, cell, plan, cache))
    return out


def _with_environment(text: str, cell: Cell, plan: ToolchainPlan, cache: Path) -> str:
    """A verdict's text with the cell's CUDA_HOME of its libraries and the build
    environment of its own (a torch cell's torch, from its index), where it has them."""
    named = plan.libraries_text()
    spec = environment_of(cell)
    extra = [named] if named else []
    if spec is not None:
        extra.append(spec.preview(cache / spec.dirname)[1])
    return "; ".join([text, *extra])


def built_entries(dist: Path) -> Mapping[str, WheelEntry]:
    """The manifest entries in `dist` by filename; none when nothing was built there."""
    if not any(dist.glob("manifest*.json")):
        return {}
    return load_dist(dist).by_filename()


def by_built_name(built: Mapping[str, WheelEntry]) -> dict[str, WheelEntry]:
    """`built` by the names their cells give them: a wheel `publish --build-tag` gave a
    build tag (`NAME-1-...`) under its name without one."""
    out = dict(built)
    for name, entry in built.items():
        wheel = WheelName.parse(name)
        if wheel.build:
            out.setdefault(wheel.with_build(()).filename, entry)
    return out


SDIST_TOOLCHAIN = ToolchainVerdict(ok=True, text="none: an sdist compiles nothing")


def sdist_row(factory: PublisherFactory, cell: Cell, dist: Path) -> PlanRow:
    """The sdist's row: its cell's PyPI destination (the default variant's), decided like a
    wheel where dist/ holds it, else by what that destination lists under its name."""
    destination = DestinationRef.of(cell)
    name = sdist_filename(cell.project.name, str(cell.project.version))
    manifest = built_manifest(dist)
    sdist = manifest.sdist if manifest is not None else None
    # the sdist this destination gets (the manifest may send its sdist elsewhere)
    built = (
        sdist is not None and sdist.filename == name and sdist.destination.name == destination.name
    )
    url = ""
    try:
        publisher = factory(destination)
        if manifest is not None and built:
            kind = kind_of(destination.kind)
            companions = kind.companions(manifest, destination.name, [], dist)
            (decided,) = plan_for(
                publisher, [], dist, replace=False, companions=companions
            ).companions
            (state, reason), url = built_state(decided), decided.url
        else:
            listed = publisher.existing({name: 0}, rehash=False).get(name)
            state, reason = unbuilt_state(listed)
            url = publisher.final_url(name) if listed is None else listed.url
    except PublishError as error:
        state, reason = State.NOT_ASKED, error.message + (f" ({error.hint})" if error.hint else "")
    return PlanRow(
        cell="sdist", wheel=name, built=built, size=sdist.size if sdist and built else None,
        destination=f"{destination.name} ({destination.kind})", url=url, state=state,
        reason=reason, toolchain=SDIST_TOOLCHAIN,
    )  # fmt: skip


def built_manifest(dist: Path) -> Manifest | None:
    """The manifest(s) of `dist` (checked by `built_entries` first); None when nothing
    was built there."""
    if not any(dist.glob("manifest*.json")):
        return None
    return read_manifests(manifest_paths(dist))


# asks an index that lists destinations (a git index) whether `project`'s pages of the
# labels can go there: PublishError (InTheWay: something of another's is in the way) if not
IndexCheck = Callable[[IndexRef, Sequence[str], str], None]


def make_plan(
    cells: Sequence[Cell],
    *,
    dist: Path,
    verdicts: Mapping[str, ToolchainVerdict],
    factory: PublisherFactory,
    expect_tag: str | None,
    gate: GpuGate | None = None,
    previous: PreviousRelease | None = None,
    previous_note: str = NO_PREVIOUS,
    sdist: Cell | None = None,
    build_tag: bool = False,
    indexes: Sequence[IndexRef] = (),
    index_check: IndexCheck | None = None,
) -> ReleasePlan:
    """The plan; `previous` (with `previous_note` saying what it is, or why there is none)
    is what each built wheel's growth is measured against; `sdist` is the cell whose
    build makes the release's sdist, where it is among `cells`; `build_tag` decides a
    CONFLICT wheel as `release publish --build-tag` does; `index_check` asks each of
    `indexes` (the git indexes the destinations name) whether it can take the pages, as
    publish does before its first upload: the rows of the destinations one cannot list
    are refused (or not asked, where it could not be reached)."""
    with tempfile.TemporaryDirectory(prefix="release-plan-") as scratch:
        plan = _make_plan(
            cells, dist=dist, verdicts=verdicts, factory=factory, expect_tag=expect_tag,
            gate=gate, previous=previous, previous_note=previous_note, sdist=sdist,
            scratch=Path(scratch) if build_tag else None,
        )  # fmt: skip
    if index_check is None or not indexes:
        return plan
    return _with_index_answers(plan, cells, indexes, index_check)


def _with_index_answers(
    plan: ReleasePlan, cells: Sequence[Cell], indexes: Sequence[IndexRef], check: IndexCheck
) -> ReleasePlan:
    listed: dict[str, list[Cell]] = {}
    for cell in (c.as_copy(copy) for c in cells for copy in c.copies):
        if (listed_by := DestinationRef.of(cell).index) is not None:
            listed.setdefault(listed_by, []).append(cell)
    answers: dict[str, tuple[State, str]] = {}
    for index in indexes:
        copies = listed.get(index.name, [])
        labels = sorted({c.local_label for c in copies if c.local_label})
        if not labels:
            continue
        try:
            check(index, labels, plan.project)
        except PublishError as error:
            state = State.REFUSED if isinstance(error, InTheWay) else State.NOT_ASKED
            said = f"its index {index.name}: {error.message}"
            answers |= {c.wheel_filename: (state, said) for c in copies}
    rows = tuple(
        replace(r, state=answers[r.wheel][0], reason=answers[r.wheel][1])
        if r.wheel in answers and r.state is not State.CONFLICT
        else r
        for r in plan.rows
    )
    return replace(plan, rows=rows)


def _make_plan(
    cells: Sequence[Cell],
    *,
    dist: Path,
    verdicts: Mapping[str, ToolchainVerdict],
    factory: PublisherFactory,
    expect_tag: str | None,
    gate: GpuGate | None,
    previous: PreviousRelease | None,
    previous_note: str,
    sdist: Cell | None,
    scratch: Path | None,
) -> ReleasePlan:
    built = built_entries(dist)
    grown = growth_by_wheel(list(built.values()), previous) if previous is not None else {}
    too_grown: list[str] = []
    over_budget: list[str] = []
    # a row per copy: a cell published to several places is one build, a wheel per place
    copies = [c.as_copy(copy) for c in cells for copy in c.copies]
    named = by_built_name(built)
    entries = {c.wheel_filename: named.get(c.wheel_filename) or unbuilt_entry(c) for c in copies}
    by_destination: dict[str, list[Cell]] = {}
    for copy in copies:
        by_destination.setdefault(entries[copy.wheel_filename].destination.name, []).append(copy)
    rows: dict[str, PlanRow] = {}
    for group in by_destination.values():
        group_entries = [entries[c.wheel_filename] for c in group]
        destination = group_entries[0].destination
        try:
            found, budget = _ask(factory, destination, group_entries, built, dist, scratch=scratch)
            over_budget += [budget] if budget else []
        except PublishError as error:
            reason = error.message + (f" ({error.hint})" if error.hint else "")
            found = {e.filename: (State.NOT_ASKED, reason, "", None) for e in group_entries}
        for cell, entry in zip(group, group_entries, strict=True):
            state, reason, url, going_as = found[entry.filename]
            if entry.filename != cell.wheel_filename:  # built, and given a build tag
                going_as = going_as or entry.filename
            rows[cell.wheel_filename] = PlanRow(
                cell=cell.id,
                wheel=cell.wheel_filename,
                built=entry.filename in built,
                size=entry.size if entry.filename in built else None,
                destination=f"{destination.name} ({destination.kind})",
                url=url,
                state=state,
                reason=reason,
                toolchain=verdicts[cell.id],
                growth=grown.get(entry.filename),
                published_as=going_as,
            )
            growth = grown.get(entry.filename)
            problem = None
            if growth is not None and previous is not None:
                problem = growth_problem(
                    entry.filename,
                    growth,
                    limit=cell.destination.max_growth_percent,
                    destination=destination.name,
                    previous=previous.version,
                )
            too_grown += [problem] if problem else []
    project = cells[0].project
    nccl = override_files({c.cuda.major: c.nccl for c in cells if c.nccl is not None})
    return ReleasePlan(
        project=project.name,
        version=str(project.version),
        rows=tuple(rows[c.wheel_filename] for c in copies),
        nccl=tuple(nccl),
        problems=tuple(tag_problems(cells, str(project.version), expect_tag) if expect_tag else ()),
        gate=gate_lines(gate, cells),
        previous=previous,
        previous_note=previous_note,
        over_budget=tuple(over_budget),
        too_grown=tuple(too_grown),
        sdist=sdist_row(factory, sdist, dist) if sdist is not None else None,
    )
