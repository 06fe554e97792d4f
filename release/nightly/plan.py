"""`release plan --channel nightly`: what publishing this commit's nightly would do, asked
read-only and without credentials, as any reader of the channel would ask.

Per cell: its wheel under the commit's dev version, where it goes and what the commit's
directory holds of it; the version order against the latest final release on each
destination of the release; the commit /nightly/ serves now and whether this one would
replace it; and what the next run prunes: the commits that fall out of retention once this
one is kept (with the matrix's keep-list and the bucket's), and those an earlier run left
being pruned. The state and the keep-list object are read over HTTP from where the channel
is served; a file's bytes are compared by the sha256 its upload recorded, read from the
headers of a GET of its first byte (stores let anyone GET a public object, not always HEAD).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from release.destinations.reach import Reach
from release.errors import ConflictError, IncompleteError, PublishError, ReleaseError
from release.matrix import Commit, Matrix, Nightly
from release.matrix.nightly import keep_list_problem
from release.nightly.finals import Finals, read_finals
from release.nightly.layout import SHA256, STATE_KEY, url_of
from release.nightly.promotion import Retention, completed, deletions, shape_of, version_of
from release.nightly.publish import order_refusal, retention_of
from release.nightly.state import NightlyState, Pointer, Shape, from_bytes
from release.publish.plan import built_entries, unbuilt_entry
from release.records.manifest import WheelEntry
from release.remote import httpclient as http_edge
from release.remote.httpclient import Client
from release.remote.retry import RetryPolicy

ASKING = RetryPolicy(attempts=3, initial_delay=1.0, total=60.0)


@dataclass(frozen=True, kw_only=True)
class NightlyRow:
    cell: str
    wheel: str
    built: bool
    size: int | None
    url: str
    state: str  # new | identical | CONFLICT | absent | present | not asked
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Pruned:
    commit: str
    version: str
    action: str  # archive | delete
    why: str


@dataclass(frozen=True, kw_only=True)
class NightlyPlan:
    project: str
    version: str
    commit: Commit
    destination: str
    rows: tuple[NightlyRow, ...]
    finals: Finals
    pointer: Pointer | None
    promotes: bool
    keep: int
    pins: tuple[str, ...]
    prunes: tuple[Pruned, ...]
    not_asked: tuple[str, ...] = ()

    @property
    def order(self) -> PublishError | None:
        return order_refusal(self.version, self.finals.releases)


def nightly_failure(plan: NightlyPlan) -> ReleaseError | None:
    """Conflicts first, then the version order, then what could not be asked."""
    conflicts = [r.wheel for r in plan.rows if r.state == "CONFLICT"]
    if conflicts:
        return ConflictError(
            f"{len(conflicts)} CONFLICT in {plan.commit.sha[:12]}'s directory "
            f"({', '.join(conflicts)})",
            hint="a commit's files never change: rebuild it with the same SOURCE_DATE_EPOCH",
        )
    if plan.order is not None:
        return plan.order
    unasked = [*plan.not_asked, *plan.finals.not_asked]
    if unasked:
        return IncompleteError(
            "not asked: " + "; ".join(unasked),
            hint="everything known locally is shown; reach the channel and the release's "
            "destinations to see the rest",
        )
    return None


def read_channel(
    client: Client, nightly: Nightly, project: str, secrets: Sequence[str]
) -> tuple[NightlyState | None, list[str], str | None]:
    """(state, the bucket's pins, why not asked) read over HTTP from where it is served
    (`secrets` masked in what it says); a channel with no state yet is an empty one."""
    base = nightly.destination.index_url
    got = http_edge.fetch(client, base + STATE_KEY, keep=True, policy=ASKING, secrets=secrets)
    if got.status == 404:
        state = NightlyState(project=project)
    elif not got.ok or got.body is None:
        return None, [], f"{base}{STATE_KEY}: {got.error or f'HTTP {got.status}'}"
    else:
        try:
            state = from_bytes(got.body, base + STATE_KEY, project=project)
        except PublishError as error:
            return None, [], error.message
    pins: list[str] = []
    if nightly.keep_list_object:
        listed = http_edge.fetch(
            client, base + nightly.keep_list_object, keep=True, policy=ASKING, secrets=secrets
        )
        if listed.ok and listed.body is not None:
            for line in listed.body.decode("utf-8", "replace").splitlines():
                text = line.split("#", 1)[0].strip()
                if text and keep_list_problem(text) is None:
                    pins.append(text)
    return state, pins, None


def _rows(
    entries: Sequence[WheelEntry],
    *,
    built: Mapping[str, WheelEntry],
    state: NightlyState | None,
    commit: Commit,
    client: Client,
    base: str,
) -> list[NightlyRow]:
    known = state is not None and bool(
        state.kept_commit(commit.sha) or state.uploading_commit(commit.sha)
    )
    rows = []
    for entry in entries:
        url = url_of(base, f"{commit.sha}/{entry.filename}")
        is_built = entry.filename in built
        if state is None:
            row_state, reason = "not asked", "the channel's state could not be read"
        elif not known:
            row_state, reason = ("new" if is_built else "absent"), ""
        else:
            there = http_edge.first_byte(client, url)
            recorded = there.headers.get(f"x-amz-meta-{SHA256}")
            if there.status == 404:
                row_state, reason = ("new" if is_built else "absent"), "an earlier run left it out"
            elif there.status not in (200, 206):
                row_state = "not asked"
                reason = f"{url} answered {there.status or there.error}"
            elif not is_built:
                row_state, reason = "present", ""
            elif recorded == built[entry.filename].sha256:
                row_state, reason = "identical", ""
            else:
                row_state = "CONFLICT"
                reason = f"holds sha256 {str(recorded)[:12]}..., built {entry.sha256[:12]}..."
        rows.append(
            NightlyRow(
                cell=entry.cell,
                wheel=entry.filename,
                built=is_built,
                size=built[entry.filename].size if is_built else None,
                url=url,
                state=row_state,
                reason=reason,
            )
        )
    return rows


def _next_run(
    state: NightlyState, commit: Commit, shape: Shape, rule: Retention, now: float | None
) -> tuple[bool, tuple[Pruned, ...]]:
    """Whether completing `commit` would move /nightly/, and what the run would prune: the
    pruning an earlier run left undone (decided afresh: never a kept, uploading or pinned
    commit, nor the pointer or its previous; the run also spares what the pages link) and
    what falls out now."""
    done = completed(
        state, commit=commit, shape=shape, files=(), pages={}, rule=rule,
        now=int(time.time() if now is None else now),
    )  # fmt: skip
    proposed, _ = deletions(state, publishing=commit.sha, pins=rule.pins, served=())
    earlier = [
        Pruned(commit=p.commit, version=str(version_of(state, p)), action=p.action,
               why="an earlier run's pruning, not done yet")
        for p in proposed
    ]  # fmt: skip
    fallen = [
        Pruned(
            commit=p.commit,
            version=str(version_of(done.state, p)),
            action=p.action,
            why=f"past the {rule.keep} newest kept, not pinned"
            if state.kept_commit(p.commit)
            else "an upload no run completed",
        )
        for p in done.fallen
    ]
    return done.promoted, tuple(earlier + fallen)


def make_nightly_plan(
    release: Matrix,
    nightly_matrix: Matrix,
    *,
    dist: Path,
    reach: Reach,
    http: Client | None = None,
    now: float | None = None,
) -> NightlyPlan:
    """The plan (see the module doc): `release` is the matrix as released (its destinations
    hold the final releases), `nightly_matrix` the commit's nightly of it."""
    nightly = release.nightly
    commit = nightly_matrix.commit
    if nightly is None or commit is None:
        raise ValueError("make_nightly_plan needs the nightly matrix of a commit")
    built = {
        name: e
        for name, e in built_entries(dist).items()
        if e.version.startswith(str(nightly_matrix.project.version))
    }
    entries = [built.get(c.wheel_filename) or unbuilt_entry(c) for c in nightly_matrix.cells]
    version = str(nightly_matrix.project.version)
    own = http is None
    client = http or reach.http()
    try:
        state, bucket_pins, not_asked = read_channel(
            client, nightly, release.project.name, reach.secrets
        )
        rows = _rows(
            entries,
            built=built,
            state=state,
            commit=commit,
            client=client,
            base=nightly.destination.index_url,
        )
        finals = read_finals(release, reach)
    finally:
        if own:
            client.close()
    rule = retention_of(nightly)
    pins = tuple(str(v) for v in rule.pins) + tuple(bucket_pins)
    rule = replace(rule, pins=rule.pins | frozenset(Version(p) for p in bucket_pins))
    promotes: bool = False
    prunes: tuple[Pruned, ...] = ()
    if state is not None:
        promotes, prunes = _next_run(state, commit, shape_of(entries, version), rule, now)
    return NightlyPlan(
        project=release.project.name,
        version=version,
        commit=commit,
        destination=f"{nightly.destination.name} (s3)",
        rows=tuple(rows),
        finals=finals,
        pointer=state.nightly if state is not None else None,
        promotes=promotes,
        keep=nightly.keep,
        pins=pins,
        prunes=prunes,
        not_asked=(not_asked,) if not_asked else (),
    )
