"""One `release publish --channel nightly`: a commit's nightly onto its s3 destination, and
/nightly/ moved to it only once it is whole and verified.

Order matters, as in a release (release.publish.run):
1. the dist: a nightly build (its manifest names the commit), checked against its wheels;
2. the version order: the nightly's version must sort above the latest final release on
   each destination of the release (read-only requests), or nothing is uploaded (exit 5);
3. the plan, through the publisher seam's one decision (release.destinations.decide): what the
   commit's directory holds already (nothing, or on a re-run what a HEAD finds);
4. stage: the commit registered in the channel's state, its wheels and `.metadata`, then
   its pages, under `/<commit>/` (release.nightly.publisher);
5. the gate: `release verify` on the commit's index (the `gate` the command hands in);
   a failure leaves /nightly/ where it was (exit 7);
6. commit: the state completed in one compare-and-swap write, the /nightly/ pages moved
   when this commit is the newest, then what fell out of retention archived or deleted;
7. `<dist>/published.json`: the commit's files and index, for `release verify --dist`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from release.destinations.companions import sidecar
from release.destinations.decide import Action, PublishPlan, plan_for
from release.destinations.reach import Reach
from release.errors import ConfigError, ConflictError, PublishError, VerifyError, shown
from release.matrix import Commit, Matrix, Nightly, require_nightly
from release.nightly.finals import Finals, read_finals
from release.nightly.layout import label_of
from release.nightly.promotion import (
    Completion,
    FinalRelease,
    Retention,
    completed,
    order_problems,
)
from release.nightly.publisher import Clock, S3Publisher, Uploaded
from release.nightly.state import Pointer, Pruning
from release.records.dist import load_dist
from release.records.manifest import MANIFEST_NAME, DestinationRef, Manifest
from release.records.published import (
    RECORD_NAME,
    Published,
    PublishedCompanion,
    PublishedFile,
    write_record,
)
from release.remote.s3 import Bucket, S3Store

Gate = Callable[[Published], Sequence[str]]  # the commit's index -> what failed (none: passed)
StoreFactory = Callable[[Bucket], S3Store]


@dataclass(frozen=True, kw_only=True)
class NightlySettings:
    dist: Path
    dry_run: bool = False
    on_upload: Uploaded | None = None


@dataclass(frozen=True, kw_only=True)
class NightlyOutcome:
    manifest: Manifest
    commit: Commit
    plan: PublishPlan
    finals: Finals
    preview: Completion  # what completing the commit would do to the state as read
    published: Published | None = None
    promoted: bool | None = None  # None: not published (a dry run)
    pointer: Pointer | None = None  # what /nightly/ serves once published
    pruned: tuple[Pruning, ...] = ()  # what this run archived or deleted
    notes: tuple[str, ...] = field(default=())

    def index_url(self, label: str, *, nightly: bool) -> str:
        """What pip is given for a variant ("" for the default one): /nightly/'s index, or
        the commit's own (which pins that commit's build)."""
        base = self.manifest.wheels[0].destination.index_url or ""
        directory = "nightly/" if nightly else f"{self.commit.sha}/"
        return base + directory + (f"{label}/" if label else "")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(sorted({label_of(w.filename) for w in self.manifest.wheels}))


def nightly_dist(manifest: Manifest, matrix: Matrix, dist: Path) -> tuple[Commit, Nightly]:
    """The commit a dist's nightly build is of and the matrix's channel it goes to;
    ConfigError when the dist holds a release, or a nightly of another destination."""
    if manifest.commit is None:
        raise ConfigError(
            [f"{dist}: a release build ({manifest.project} {manifest.version}), not a nightly"],
            hint="build it with `release build --channel nightly`, or publish the release "
            "without --channel",
        )
    nightly = require_nightly(matrix)
    wanted = nightly.destination.name
    others = sorted({w.destination.name for w in manifest.wheels} - {wanted})
    if others:
        raise ConfigError(
            [f"{dist}: built for destination {others[0]!r}; {matrix.path.name}'s channel "
             f"goes to {wanted!r}"],
            hint="build again with `release build --channel nightly` from this matrix",
        )  # fmt: skip
    channel = nightly.destination
    for key in ("bucket", "prefix", "endpoint", "region", "index_url"):
        recorded = {getattr(w.destination, key) for w in manifest.wheels}
        if recorded != {getattr(channel, key)}:
            shown_key = key.replace("_", "-")
            raise ConfigError(
                [f"{dist / MANIFEST_NAME}: built for the channel's {shown_key} "
                 f"{shown(sorted(map(str, recorded))[0])}; {matrix.path.name}'s is "
                 f"{shown(getattr(channel, key))}: the dist goes where matrix.yaml says"],
                hint="build again with `release build --channel nightly` from this matrix",
            )  # fmt: skip
    return manifest.commit, nightly


def retention_of(nightly: Nightly) -> Retention:
    return Retention(keep=nightly.keep, pins=frozenset(nightly.keep_list), fallout=nightly.fallout)


def bucket_of(destination: DestinationRef) -> Bucket:
    return Bucket(
        name=destination.bucket or "",
        endpoint=destination.endpoint,
        region=destination.region or "auto",
    )


def order_refusal(version: str, finals: Sequence[FinalRelease]) -> PublishError | None:
    """The version-order rule as the error plan and publish stop with (exit 5)."""
    problems = order_problems(Version(version), finals)
    if not problems:
        return None
    highest = max(f.version for f in finals)
    return PublishError(
        "; ".join(problems),
        hint=f"a nightly is X.Y.Z.devN of the project's next version: raise the project's "
        f"version above {highest.public} (after releasing {highest.public}, the next is "
        f"{_next(highest)})",
    )


def require_order(version: str, finals: Finals) -> None:
    """Refuse (exit 5) before anything is uploaded: a destination that could not be asked,
    or a final release the nightly does not sort above."""
    if finals.not_asked:
        raise PublishError(
            "cannot check that the nightly sorts above the latest final release: "
            + "; ".join(finals.not_asked),
            hint="nothing was uploaded; reach the release's destinations and run it again",
        )
    refusal = order_refusal(version, finals.releases)
    if refusal is not None:
        raise refusal


def _next(version: Version) -> str:
    release = list(version.release) + [0] * (3 - len(version.release))
    release[-1] += 1
    return ".".join(str(n) for n in release)


def publisher_for(
    manifest: Manifest,
    nightly: Nightly,
    commit: Commit,
    store: S3Store,
    *,
    settings: NightlySettings,
    clock: Clock,
) -> S3Publisher:
    return S3Publisher(
        manifest.wheels[0].destination,
        store,
        project=manifest.project,
        commit=commit,
        version=manifest.version,
        retention=retention_of(nightly),
        keep_list_object=nightly.keep_list_object,
        archive_prefix=nightly.archive_prefix,
        clock=clock,
        on_upload=settings.on_upload,
    )


def published_of(publisher: S3Publisher, plan: PublishPlan) -> Published:
    """The commit's files, their `.metadata` and the index of each variant, as `release
    verify` checks them."""
    files = tuple(
        PublishedFile.from_entry(
            d.entry,
            url=publisher.final_url(d.entry.filename),
            index_url=publisher.commit_url(d.entry.local_label),
        )
        for d in plan.decisions
    )
    companions = tuple(
        PublishedCompanion(
            filename=c.companion.filename,
            sha256=c.companion.sha256,
            size=c.companion.size,
            url=publisher.final_url(c.companion.filename),
            of=c.companion.of,
            purpose=c.companion.purpose,
        )
        for c in plan.companions
    )
    return Published(
        project=publisher.project,
        version=publisher.version,
        files=files,
        companions=companions,
    )


def publish_nightly(
    settings: NightlySettings,
    matrix: Matrix,
    reach: Reach,
    *,
    gate: Gate,
    store_factory: StoreFactory | None = None,
    finals: Finals | None = None,
    show_plan: Callable[[NightlyOutcome], None] | None = None,
    clock: Clock = time.time,
) -> NightlyOutcome:
    """The whole run (see the module doc); a re-run finishes what an interrupted one left."""
    manifest = load_dist(settings.dist)
    commit, nightly = nightly_dist(manifest, matrix, settings.dist)
    finals = finals or read_finals(matrix, reach)
    require_order(manifest.version, finals)
    if reach.s3_keys is None and not settings.dry_run:
        raise PublishError(
            f"{nightly.destination.name}: no AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in "
            "the environment",
            hint="export the bucket's keys (R2: an API token's S3 keys); a dry run reads "
            "the bucket without them",
        )
    bucket = bucket_of(manifest.wheels[0].destination)
    store = store_factory(bucket) if store_factory else reach.s3(bucket)
    publisher = publisher_for(manifest, nightly, commit, store, settings=settings, clock=clock)
    plan = plan_for(
        publisher,
        manifest.wheels,
        settings.dist,
        replace=False,
        companions=[sidecar(e, settings.dist) for e in manifest.wheels],
        can_replace=False,
    )
    outcome = NightlyOutcome(
        manifest=manifest,
        commit=commit,
        plan=plan,
        finals=finals,
        preview=preview(publisher, plan, now=int(clock())),
    )
    if show_plan is not None:
        show_plan(outcome)
    if plan.blocked:
        raise blocked(plan, commit)
    if settings.dry_run:
        return outcome
    notes = publisher.stage(plan, settings.dist)
    published = published_of(publisher, plan)
    passed(gate, published, publisher, commit)
    decisions = publisher.commit(plan, settings.dist)
    write_record(
        settings.dist / RECORD_NAME,
        manifest,
        list(published.files),
        list(published.companions),
        reach.secrets,
    )
    promotion = publisher.promotion
    return replace(
        outcome,
        plan=replace(plan, decisions=decisions),
        published=published,
        promoted=promotion.promoted if promotion else None,
        pointer=promotion.state.nightly if promotion else None,
        pruned=promotion.pruned if promotion else (),
        notes=(*notes, *publisher.notes),
    )


def passed(gate: Gate, published: Published, publisher: S3Publisher, commit: Commit) -> None:
    """`release verify` on the commit's index, before /nightly/ may move to it; a failure
    is a VerifyError (exit 7) saying what /nightly/ still serves."""
    failures = gate(published)
    if failures:
        pointer = publisher.read_state().state.nightly
        where = f"still serves {pointer.version}" if pointer else "serves nothing yet"
        raise VerifyError(
            f"release verify failed on {commit.sha[:12]}'s index: {failures[0]} "
            f"({len(failures)} check(s) failed); /nightly/ {where}",
            hint="run `release publish --channel nightly` again once the store serves what "
            "was uploaded (it uploads only what is missing)",
        )


def preview(publisher: S3Publisher, plan: PublishPlan, *, now: int) -> Completion:
    """What completing the commit would do to the state as read now: whether /nightly/
    would move, and what would fall out (the matrix's keep-list and the bucket's)."""
    state = publisher.read_state().state
    pins = frozenset(Version(v) for v in publisher.bucket_pins())
    rule = replace(publisher.retention, pins=publisher.retention.pins | pins)
    return completed(
        state,
        commit=publisher.commit_id,
        shape=publisher.shape(plan),
        files=(),
        pages={},
        rule=rule,
        now=now,
    )


def blocked(plan: PublishPlan, commit: Commit) -> PublishError:
    conflicts = [d.entry.filename for d in plan.with_action(Action.CONFLICT)]
    conflicts += [c.companion.filename for c in plan.companions_with(Action.CONFLICT)]
    if conflicts:
        return ConflictError(
            f"{len(conflicts)} CONFLICT in {commit.sha[:12]}'s directory "
            f"({', '.join(conflicts)}): nothing was uploaded",
            hint="a commit's files never change: rebuild it with the same SOURCE_DATE_EPOCH "
            "and toolchain pins",
        )
    refused = [f"{d.entry.filename}: {d.reason}" for d in plan.with_action(Action.REFUSED)]
    return PublishError(
        f"refused: {'; '.join(refused)}: nothing was uploaded", hint="fix the refused files"
    )
