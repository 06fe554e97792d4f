"""One `release publish`: plan every destination (read-only), then stage, commit, index.

Order matters and is the whole point of this module:
1. read the manifest(s) in `--dist`, checked against the wheels beside them;
2. plan EVERY destination with read-only requests (the one `decide` of release.publish.
   decide) and show the plan;
3. stop, having uploaded nothing, if any file anywhere is a CONFLICT or refused;
4. stage every destination that can hold files unpublished (the GitHub draft: wheels,
   their PEP 658 `.metadata`, the NCCL files, the release manifest, all verified);
5. commit the destinations that cannot stage (PyPI uploads), then the staged ones (the
   draft is published): nothing is public until every destination holds its files, and
   a failure anywhere leaves at most a draft that a re-run completes;
6. regenerate the index from every release ever published (never append), with the NCCL
   pins under `nccl/`; write `<dist>/published.json` after each destination, and the
   companion files as published to `<dist>/companions/` (what the workflow attests
   beside the wheels and the index).

With `--build-tag`, step 2 decides each CONFLICT wheel again as the next build of its name
(release.destinations.buildtag) and plans every destination again with those wheels (their
`.metadata`, and release-manifest.json listing them); once nothing is blocked, the
build-tagged wheels take their originals' places in dist/ and its manifests before step 4,
so that what is uploaded, recorded and verified is what dist/ says.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from release.destinations.base import Publisher, Uploaded
from release.destinations.buildtag import Rebuilt, marked, with_build_tags
from release.destinations.companions import release_files
from release.destinations.decide import (
    Action,
    Companion,
    CompanionDecision,
    FileDecision,
    PublishPlan,
    plan_for,
)
from release.destinations.index import is_flat_file, write_index
from release.destinations.reach import Reach
from release.destinations.registry import kind_of
from release.errors import ConfigError, ConflictError, PublishError, ReleaseError
from release.provenance.attestation import attestation_path
from release.publish.indexes import (
    IndexOutcome,
    check_indexes,
    check_pages_index,
    regenerate_indexes,
)
from release.records.dist import load_dist, write_rebuilt
from release.records.manifest import DestinationRef, Manifest, WheelEntry
from release.records.published import (
    RECORD_NAME,
    PublishedCompanion,
    PublishedFile,
    write_record,
)

log = logging.getLogger("release.publish")

COMPANIONS_DIR = "companions"


@dataclass(frozen=True, kw_only=True)
class PublishSettings:
    """What to publish and where the index goes; how the destinations are reached (their
    clients, credentials and URL overrides) is the command's Reach."""

    dist: Path
    dry_run: bool = False
    replace: bool = False
    build_tag: bool = False  # a CONFLICT wheel goes as the next build of its name
    only: tuple[str, ...] = ()
    index_dir: Path | None = None
    pages_repo: Path | None = None
    pages_branch: str | None = None
    pages_remote: str | None = None
    on_upload: Uploaded | None = None  # after each file sent: its name and size


@dataclass(frozen=True, kw_only=True)
class DestinationPlan:
    destination: DestinationRef
    plan: PublishPlan


@dataclass(frozen=True, kw_only=True)
class PublishOutcome:
    manifest: Manifest
    plans: tuple[DestinationPlan, ...]
    applied: tuple[FileDecision, ...] = ()
    companions: tuple[CompanionDecision, ...] = ()
    indexes: tuple[IndexOutcome, ...] = ()
    record: Path | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def blocked(self) -> bool:
        return any(p.plan.blocked for p in self.plans)

    @property
    def upload_bytes(self) -> int:
        """What applying the plan sends: the wheels and companion files to upload."""
        sending = (Action.UPLOAD, Action.REPLACE)
        return sum(
            sum(d.entry.size for d in p.plan.with_action(*sending))
            + sum(c.companion.size for c in p.plan.companions_with(*sending))
            for p in self.plans
        )

    @property
    def over_budget(self) -> tuple[str, ...]:
        """Why destinations refuse the release as a whole (their project size limit)."""
        return tuple(p.plan.budget for p in self.plans if p.plan.budget)

    @property
    def unasked(self) -> tuple[str, ...]:
        """The destinations a dry run could not ask, with why."""
        return tuple(
            f"{p.destination.name}: {p.plan.decisions[0].reason}"
            for p in self.plans
            if p.plan.unasked
        )


PublisherFactory = Callable[[DestinationRef], Publisher]


def select(manifest: Manifest, only: Sequence[str]) -> dict[str, list[WheelEntry]]:
    """The manifest's wheels by destination name, filtered by `--only` (a kind or a name)."""
    groups: dict[str, list[WheelEntry]] = {}
    for entry in sorted(manifest.wheels, key=lambda w: w.filename):
        groups.setdefault(entry.destination.name, []).append(entry)
    if not only:
        return groups
    named = {name: {name, entries[0].destination.kind} for name, entries in groups.items()}
    known = set().union(*named.values())
    unknown = [o for o in only if o not in known]
    if unknown:
        raise ConfigError(
            [f"--only {o}: no destination or kind of that name" for o in unknown],
            hint=f"the manifest has: {', '.join(sorted(known))}",
        )
    return {name: entries for name, entries in groups.items() if named[name] & set(only)}


# --- Planning. ---


def plan_destination(
    publisher: Publisher,
    entries: Sequence[WheelEntry],
    dist: Path,
    *,
    replace: bool,
    companions: Sequence[Companion] = (),
    rewrite_records: bool = False,
) -> PublishPlan:
    """`plan_for`, where a kind that never takes other bytes under a used filename (PyPI)
    leaves --replace without effect."""
    can_replace = kind_of(entries[0].destination.kind).can_replace if entries else True
    return plan_for(
        publisher,
        entries,
        dist,
        replace=replace,
        companions=companions,
        can_replace=can_replace,
        rewrite_records=rewrite_records,
    )


def build_plans(
    manifest: Manifest,
    settings: PublishSettings,
    factory: PublisherFactory,
    *,
    rebuilt: Mapping[str, Rebuilt] | None = None,
) -> tuple[tuple[DestinationPlan, ...], dict[str, Publisher]]:
    """Every destination's plan; `rebuilt` (by their build-tagged names) are the wheels of
    `manifest` that are rebuilds: their decisions say so, and a record of the release that
    lists them is written again."""
    plans = []
    publishers: dict[str, Publisher] = {}
    extras = release_files(manifest, settings.dist)
    for name, entries in select(manifest, settings.only).items():
        destination = entries[0].destination
        try:
            publisher = factory(destination)
            publishers[name] = publisher
            companions = kind_of(destination.kind).companions(
                manifest, name, entries, settings.dist, extras
            )
            plan = plan_destination(
                publisher, entries, settings.dist, replace=settings.replace,
                companions=companions, rewrite_records=bool(rebuilt),
            )  # fmt: skip
            if rebuilt:
                plan = replace(plan, decisions=tuple(_said(d, rebuilt) for d in plan.decisions))
        except PublishError as error:
            if not settings.dry_run:
                raise
            plan = not_asked(entries, error)
        plans.append(DestinationPlan(destination=destination, plan=plan))
    return tuple(plans), publishers


def _said(decision: FileDecision, rebuilt: Mapping[str, Rebuilt]) -> FileDecision:
    wheel = rebuilt.get(decision.entry.filename)
    return decision if wheel is None else marked(decision, wheel.built)


def rebuild_plans(
    manifest: Manifest,
    plans: Sequence[DestinationPlan],
    publishers: Mapping[str, Publisher],
    settings: PublishSettings,
    scratch: Path,
) -> tuple[Manifest, tuple[DestinationPlan, ...], dict[str, Rebuilt]]:
    """`--build-tag`: each CONFLICT wheel as the next build of its name (written into
    `scratch`), and every destination planned again with them: the manifest as it will be
    published, the plans, and the rebuilt wheels by the names they were built under. The
    same manifest and plans where nothing is a CONFLICT."""
    rebuilt: dict[str, Rebuilt] = {}
    for item in plans:
        publisher = publishers.get(item.destination.name)
        if publisher is not None and item.plan.with_action(Action.CONFLICT):
            rebuilt.update(with_build_tags(publisher, item.plan, settings.dist, scratch)[1])
    if not rebuilt:
        return manifest, tuple(plans), {}
    wheels = tuple(
        rebuilt[w.filename].entry if w.filename in rebuilt else w for w in manifest.wheels
    )
    published = replace(manifest, wheels=wheels)
    view = dist_view(settings.dist, scratch / "dist", [w.path for w in rebuilt.values()])
    tagged = {w.entry.filename: w for w in rebuilt.values()}
    again, _ = build_plans(published, replace(settings, dist=view), _asked(plans, publishers),
                           rebuilt=tagged)  # fmt: skip
    return published, again, rebuilt


def _asked(
    plans: Sequence[DestinationPlan], publishers: Mapping[str, Publisher]
) -> PublisherFactory:
    """The publishers the first plans made, asked again; a destination a dry run could not
    ask stays not asked, for the same reason."""
    unasked = {p.destination.name: p.plan.decisions[0].reason for p in plans if p.plan.unasked}

    def make(destination: DestinationRef) -> Publisher:
        if destination.name in unasked:
            raise PublishError(unasked[destination.name])
        return publishers[destination.name]

    return make


def dist_view(dist: Path, view: Path, extra: Sequence[Path]) -> Path:
    """A directory that reads as `dist` with the files `extra` added (links to each), for
    planning a publish that has not changed dist/ yet."""
    view.mkdir()
    for path in [*extra, *dist.iterdir()]:
        if not (view / path.name).exists():
            (view / path.name).symlink_to(path.resolve())
    return view


def not_asked(entries: Sequence[WheelEntry], error: PublishError) -> PublishPlan:
    """The plan of a destination a dry run could not ask: every file, and why."""
    reason = error.message + (f" ({error.hint})" if error.hint else "")
    return PublishPlan(
        decisions=tuple(
            FileDecision(entry=e, action=Action.NOT_ASKED, reason=reason, url="") for e in entries
        )
    )


def next_version(version: str) -> str:
    """The post-release after `version` (0.1.0 -> 0.1.0.post1, 0.1.0.post1 -> 0.1.0.post2):
    what to release when the published one cannot change."""
    try:
        parsed = Version(version)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return "a new version"
    pre = "".join(str(part) for part in parsed.pre) if parsed.pre else ""
    return f"{parsed.base_version}{pre}.post{(parsed.post or 0) + 1}"


def frozen_error(plans: Sequence[DestinationPlan], version: str, *, replace: bool) -> ConflictError:
    """Why a publish to an immutable release stops before any request that changes it."""
    frozen = next(p for p in plans if p.plan.frozen and p.plan.blocked)
    changing = [
        d.entry.filename for d in frozen.plan.with_action(Action.CONFLICT, Action.REFUSED)
    ] + [c.companion.filename for c in frozen.plan.companions_with(Action.CONFLICT, Action.REFUSED)]
    asked = ", --replace or not" if replace else ""
    return ConflictError(
        f"{frozen.plan.frozen}: GitHub refuses any change to its assets{asked}, and "
        f"{len(changing)} file(s) would change ({', '.join(changing)}); nothing was uploaded",
        hint=f"immutable releases can't change: release a new version, such as "
        f"{next_version(version)}",
    )


def blocked_error(plans: Sequence[DestinationPlan], *, build_tag: bool = False) -> PublishError:
    wheels = [d.entry.filename for p in plans for d in p.plan.with_action(Action.CONFLICT)]
    files = [c.companion for p in plans for c in p.plan.companions_with(Action.CONFLICT)]
    conflicts = wheels + [c.filename for c in files]
    # a record of the release differs because the wheels do: --build-tag writes it again
    others = [c.filename for c in files if not c.record]
    refused = [d for p in plans for d in p.plan.with_action(Action.REFUSED)]
    budgets = [p.plan.budget for p in plans if p.plan.budget]
    parts = []
    if conflicts:
        parts.append(f"{len(conflicts)} CONFLICT")
    if refused:
        parts.append(f"{len(refused)} refused")
    message = f"{' and '.join(parts)}: nothing was uploaded"
    if budgets:
        message = "; ".join([*budgets, message] if parts else budgets) + (
            "" if parts else ": nothing was uploaded"
        )
    if conflicts:
        hint = conflict_hint(wheels, others, build_tag=build_tag)
        if refused:  # fixed first: neither --replace nor --build-tag takes a refused file
            hint = "fix the refused files first (reasons above) and rebuild"
        return ConflictError(message, hint=hint)
    if budgets and not refused:
        return PublishError(message, hint="make the release smaller, or raise the limit (above)")
    return PublishError(message, hint="fix the refused files (reasons above) and rebuild")


def conflict_hint(wheels: Sequence[str], others: Sequence[str], *, build_tag: bool) -> str:
    """What to do about CONFLICTs: a rebuilt wheel can go under the next build tag of its
    name (`--build-tag`), any other file cannot (it has no build tag), and nothing can on
    a wheel `--build-tag` could not rewrite."""
    if wheels and not others and not build_tag:
        return (
            "a destination holds other bytes under these wheels' names: pass --build-tag to "
            "publish each rebuilt wheel as the next build of its name (NAME-1-...whl) beside "
            "the old bytes, or bump the version (--replace overwrites GitHub assets under "
            "their URLs instead; PyPI never allows it)"
        )
    if build_tag:
        return (
            f"--build-tag gives rebuilt wheels a new name; {', '.join([*others, *wheels])} "
            "cannot take one (reasons above): bump the version"
        )
    return (
        "a destination holds other bytes under the same filename; bump the version, "
        "or pass --replace to overwrite GitHub assets (PyPI never allows it)"
    )


# --- The destinations, by kind. ---


def default_factory(reach: Reach, on_upload: Uploaded | None = None) -> PublisherFactory:
    """Each destination's publisher, made by its kind (release.destinations.registry)."""

    def make(destination: DestinationRef) -> Publisher:
        return kind_of(destination.kind).publisher(destination, reach, on_upload)

    return make


# --- The publish record. ---


def index_url_for(entry: WheelEntry, publisher: Publisher, reach: Reach) -> str | None:
    """The index pip finds a published wheel in, as its kind says."""
    return kind_of(entry.destination.kind).index_url(entry, publisher, reach)


def published_file(
    decision: FileDecision, index_url: str | None, *, attested: bool = False
) -> PublishedFile:
    return PublishedFile.from_entry(
        decision.entry, url=decision.url, index_url=index_url, attested=attested
    )


def published_companion(decision: CompanionDecision) -> PublishedCompanion:
    companion = decision.companion
    return PublishedCompanion(
        filename=companion.filename,
        sha256=companion.sha256,
        size=companion.size,
        url=decision.url,
        of=companion.of,
        purpose=companion.purpose,
    )


# --- The whole command. ---


def publish(
    settings: PublishSettings,
    reach: Reach,
    *,
    factory: PublisherFactory | None = None,
    show_plan: Callable[[PublishOutcome], None] | None = None,
) -> PublishOutcome:
    """Plan, check, stage, commit, index. Raises ConflictError/PublishError when blocked
    (after the plan was shown) or when a destination fails; a re-run finishes what is
    missing. `reach` is how the command reaches the destinations (release.destinations.
    reach); `factory` replaces their kinds' publishers."""
    manifest = load_dist(settings.dist)
    selected = select(manifest, settings.only)
    check_pages_index([e[0].destination for e in selected.values()], settings, reach)
    make = factory or default_factory(reach, settings.on_upload)
    plans, publishers = build_plans(manifest, settings, make)
    with ExitStack() as scratch:
        rebuilt: dict[str, Rebuilt] = {}
        if settings.build_tag:
            where = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="release-")))
            manifest, plans, rebuilt = rebuild_plans(manifest, plans, publishers, settings, where)
        outcome = PublishOutcome(manifest=manifest, plans=plans)
        unreached = check_indexes(outcome, reach, dry_run=settings.dry_run)
        outcome = replace(
            outcome,
            plans=tuple(
                replace(p, plan=not_asked([d.entry for d in p.plan.decisions], error))
                if (error := unreached.get(p.destination.index or "")) is not None
                else p
                for p in outcome.plans
            ),
        )
        if show_plan is not None:
            show_plan(outcome)
        if outcome.blocked:
            if any(p.plan.frozen and p.plan.blocked for p in plans):
                raise frozen_error(plans, manifest.version, replace=settings.replace)
            raise blocked_error(plans, build_tag=settings.build_tag)
        if settings.dry_run:
            return outcome
        write_rebuilt(settings.dist, {w.built: (w.entry, w.path) for w in rebuilt.values()})
    return _apply(outcome, settings, reach, publishers)


def _apply(
    outcome: PublishOutcome,
    settings: PublishSettings,
    reach: Reach,
    publishers: Mapping[str, Publisher],
) -> PublishOutcome:
    staged = [p for p in outcome.plans if publishers[p.destination.name].stages]
    direct = [p for p in outcome.plans if not publishers[p.destination.name].stages]
    notes: list[str] = []
    for item in staged:
        done = publishers[item.destination.name].stage(item.plan, settings.dist)
        notes += [f"{item.destination.name}: {line}" for line in done]
    public: list[str] = []  # the destinations committed: public from then on
    try:
        return _commit(
            [*direct, *staged], outcome, settings, reach, publishers, notes=notes, public=public
        )
    except ReleaseError as error:
        if public:
            error.hint = (f"{error.hint}; " if error.hint else "") + after_public(
                outcome.manifest, public
            )
        raise


def after_public(manifest: Manifest, public: Sequence[str]) -> str:
    """What a failure after the first commit says: what is public, and how to finish."""
    return (
        f"{manifest.project} {manifest.version} is already public on {', '.join(public)}: "
        "fix this and run release publish again, which uploads nothing twice and completes "
        "the rest (the other destinations, published.json, the index)"
    )


def _commit(
    items: Sequence[DestinationPlan],
    outcome: PublishOutcome,
    settings: PublishSettings,
    reach: Reach,
    publishers: Mapping[str, Publisher],
    *,
    notes: list[str],
    public: list[str],
) -> PublishOutcome:
    """Each destination's commit (its name added to `public` once done), the record, the
    companion files and the indexes."""
    record_path = settings.dist / RECORD_NAME
    applied: list[FileDecision] = []
    companions: list[CompanionDecision] = []
    for item in items:
        publisher = publishers[item.destination.name]
        done_files = publisher.commit(item.plan, settings.dist)
        public.append(item.destination.name)
        done_companions = [
            replace(c, url=publisher.final_url(c.companion.filename)) for c in item.plan.companions
        ]
        applied.extend(done_files)
        companions.extend(done_companions)
        write_record(
            record_path,
            outcome.manifest,
            [
                published_file(
                    d,
                    index_url_for(d.entry, publisher, reach),
                    attested=attestation_path(settings.dist / d.entry.filename).is_file(),
                )
                for d in done_files
            ],
            [published_companion(c) for c in done_companions],
            reach.secrets,
        )
    if companions:
        write_index(
            {c.companion.filename: c.companion.data for c in companions},
            settings.dist / COMPANIONS_DIR,
            owned=is_flat_file,
        )
    indexes, left_out = regenerate_indexes(outcome, settings, reach)
    notes += [f"index: {line}" for line in left_out]
    return replace(
        outcome,
        applied=tuple(applied),
        companions=tuple(companions),
        indexes=indexes,
        record=record_path,
        notes=tuple(notes),
    )
