"""The s3 publisher: one commit's nightly on S3-compatible storage, behind the `Publisher`
seam of release.destinations.base.

`stage` makes the commit's files present under `/<commit>/` and links nothing new from
`/nightly/`: it registers the commit in the channel's state (compare-and-swap), uploads
the wheels and their `.metadata` (each `If-None-Match: *`, so nothing is ever overwritten),
then the commit's pages. `commit`, which `release publish` calls only once `release
verify` passed on those pages, completes the commit in the state in one compare-and-swap
write (kept, promoted where it is the newest, retention applied), then moves the
`/nightly/` pages (each written `If-Match` the ETag the previous promotion gave it, never
over a page of a newer promotion), then archives or deletes what fell out.

What the publisher asks is bounded by the commit's cells: the state object (GET), and on
a re-run only a HEAD per file of this commit. Nothing is listed.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from release.destinations.decide import Action, FileDecision, PublishPlan, RemoteFile
from release.destinations.index import requires_python_of
from release.errors import ConflictError, PublishError
from release.matrix import Commit
from release.matrix.nightly import keep_list_problem
from release.nightly.layout import (
    GENERATION,
    IMMUTABLE,
    METADATA_TYPE,
    NIGHTLY_DIR,
    NO_CACHE,
    SHA256,
    STATE_KEY,
    WHEEL_TYPE,
    archive_key,
    commit_keys,
    file_key,
    url_of,
)
from release.nightly.pages import Page, commit_pages, nightly_pages, root_pages
from release.nightly.promotion import (
    Completion,
    Retention,
    completed,
    deletions,
    registered,
    settled,
    shape_of,
    with_roots,
)
from release.nightly.state import (
    MAX_STATE_BYTES,
    NightlyFile,
    NightlyState,
    Pruning,
    Shape,
    from_bytes,
    to_bytes,
)
from release.records.manifest import DestinationRef, WheelEntry
from release.remote.s3 import Precondition, S3Store

log = logging.getLogger("release.nightly.publisher")

CAS_ATTEMPTS = 20  # compare-and-swap rounds before giving up on a busy state
CONDITIONAL_ATTEMPTS = 3  # creations refused (409) while nothing is there, before giving up
MAX_NOTES = 10  # keep-list lines named one by one; the rest are counted
MAX_PAGE_BYTES = 4 * 2**20  # a /nightly/ page read back that is larger is not this tool's
MAX_KEEP_LIST_BYTES = 16 * 2**20  # of a keep-list object, lines past it are not read
_LINKED = re.compile(rb"(?<![0-9a-f])([0-9a-f]{40})/")
Uploaded = Callable[[str, int], None]
Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class Read:
    """The state as one GET found it, with the ETag a compare-and-swap write names."""

    state: NightlyState
    etag: str | None  # None: there is no state object yet
    data: bytes = b""  # the object's bytes as read


@dataclass(frozen=True, kw_only=True)
class Promotion:
    """What `commit` did: the state it wrote, whether /nightly/ moved, what was pruned."""

    state: NightlyState
    promoted: bool
    pruned: tuple[Pruning, ...]
    pages_written: int


class S3Publisher:
    """One commit's nightly on one s3 destination."""

    stages = True

    def __init__(
        self,
        destination: DestinationRef,
        store: S3Store,
        *,
        project: str,
        commit: Commit,
        version: str,
        retention: Retention,
        keep_list_object: str | None = None,
        archive_prefix: str = "archive/",
        clock: Clock = time.time,
        on_upload: Uploaded | None = None,
    ) -> None:
        self.name = destination.name
        self.destination = destination
        self.store = store
        self.prefix = destination.prefix or ""
        self.public = destination.index_url or ""
        self.project = project
        self.commit_id = commit
        self.version = version
        self.retention = retention
        self.keep_list_object = keep_list_object
        self.archive_prefix = archive_prefix
        self.clock = clock
        self.on_upload = on_upload
        self._read: Read | None = None
        self._pins: list[str] | None = None
        self.promotion: Promotion | None = None
        self.notes: list[str] = []

    # --- the seam's read side ---

    @property
    def frozen(self) -> str | None:
        return None

    @property
    def taken(self) -> str | None:
        return None  # the bucket's commits are this project's alone

    @property
    def index_url(self) -> str | None:
        return None

    def read_state(self, *, again: bool = False) -> Read:
        """The channel's state (one GET, kept for the run unless `again`)."""
        if self._read is None or again:
            key = self.prefix + STATE_KEY
            stored = self.store.get(key, most=MAX_STATE_BYTES)
            if stored is None:
                self._read = Read(state=NightlyState(project=self.project), etag=None)
            else:
                where = f"{self.store.bucket.describe()}/{key}"
                state = from_bytes(stored.data, where, project=self.project)
                self._read = Read(state=state, etag=stored.etag, data=stored.data)
        return self._read

    def existing(self, files: Mapping[str, int], *, rehash: bool) -> Mapping[str, RemoteFile]:
        """A commit the state does not know has nothing uploaded: no request. One it knows
        (a re-run, or a run interrupted part way) has each of its files asked with a HEAD:
        the sha256 its upload recorded, checked against the built one by `decide`."""
        state = self.read_state().state
        sha = self.commit_id.sha
        if not (state.kept_commit(sha) or state.uploading_commit(sha)):
            return {}
        found = {}
        for name in files:
            head = self.store.head(file_key(self.prefix, sha, name))
            if head is not None:
                found[name] = RemoteFile(
                    name=name, size=head.size, sha256=head.metadata.get(SHA256),
                    url=self.final_url(name),
                )  # fmt: skip
        return found

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        if entry.size > entry.destination.max_file_size:
            return (
                f"{entry.size / 2**20:.0f} MiB is over the "
                f"{entry.destination.max_file_size / 2**20:.0f} MiB one PUT takes"
            )
        return None

    def held_files(self) -> Collection[str]:
        """A commit's files are this build's alone: nothing of another spelling is held."""
        return ()

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        return None

    def final_url(self, name: str) -> str:
        return url_of(self.public, f"{self.commit_id.sha}/{name}")

    # --- staging: the commit's files and pages ---

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        shape = self.shape(plan)
        known = self.read_state().state
        again = bool(known.kept_commit(self.commit_id.sha) or known.uploading_commit(
            self.commit_id.sha))  # fmt: skip
        self._register(shape)
        done: list[str] = []
        for decision in plan.with_action(Action.UPLOAD):
            data = (dist / decision.entry.filename).read_bytes()
            if self._create(decision.entry.filename, data, WHEEL_TYPE):
                done.append(f"uploaded {decision.entry.filename}")
        for companion in plan.companions_with(Action.UPLOAD):
            if self._create(companion.companion.filename, companion.companion.data, METADATA_TYPE):
                done.append(f"uploaded {companion.companion.filename}")
        for page in commit_pages(self.prefix, self.commit_id.sha, self.project, self.files(plan)):
            self._create_page(page, look_first=again)
        done.append(f"wrote the index of {self.commit_id.sha} ({self.commit_url()})")
        return done

    def shape(self, plan: PublishPlan) -> Shape:
        return shape_of([d.entry for d in plan.decisions], self.version)

    def files(self, plan: PublishPlan) -> list[NightlyFile]:
        """The commit's wheels as its pages list them."""
        sidecars = {c.companion.of: c.companion for c in plan.companions}
        out = []
        for decision in plan.decisions:
            entry = decision.entry
            metadata = sidecars[entry.filename]
            out.append(
                NightlyFile(
                    filename=entry.filename,
                    sha256=entry.sha256,
                    size=entry.size,
                    metadata_sha256=metadata.sha256,
                    requires_python=requires_python_of(metadata.data),
                )
            )
        return sorted(out, key=lambda f: f.filename)

    def commit_url(self, label: str | None = None) -> str:
        return self.public + f"{self.commit_id.sha}/" + (f"{label}/" if label else "")

    def _register(self, shape: Shape) -> None:
        now = int(self.clock())

        def change(state: NightlyState) -> NightlyState | None:
            return registered(state, self.commit_id, shape, now=now)

        self.swap(change)

    def swap(self, change: Callable[[NightlyState], NightlyState | None]) -> NightlyState:
        """Write `change(state)` by compare-and-swap, reading the state again after each
        write another run made first; the state as written (or as read, where `change`
        leaves it as it is)."""
        read = self.read_state()
        for _ in range(CAS_ATTEMPTS):
            new = change(read.state)
            if new is None:
                return read.state
            data = to_bytes(new)
            try:
                etag = self.store.put(
                    self.prefix + STATE_KEY,
                    data,
                    content_type="application/json",
                    cache_control=NO_CACHE,
                    create_only=read.etag is None,
                    if_match=read.etag,
                )
            except Precondition:
                read = self.read_state(again=True)
                if read.data == data:
                    # this run's write landed (its answer was lost, or a 409 came back
                    # for a write that went through): the state is what it wrote
                    return new
                log.info("the nightly state changed under this run: reading it again")
                continue
            self._read = Read(state=new, etag=etag, data=data)
            return new
        raise PublishError(
            f"{self.store.bucket.describe()}/{self.prefix}{STATE_KEY} changed {CAS_ATTEMPTS} "
            "times while this run tried to write it",
            hint="other runs are publishing at the same time; run this one again",
        )

    def _create(self, filename: str, data: bytes, content_type: str) -> bool:
        """Upload one of the commit's files unless it is there with these bytes; a file
        there with other bytes is a ConflictError."""
        key = file_key(self.prefix, self.commit_id.sha, filename)
        sha256 = hashlib.sha256(data).hexdigest()
        for _ in range(CONDITIONAL_ATTEMPTS):
            try:
                self.store.put(
                    key, data, content_type=content_type, cache_control=IMMUTABLE,
                    metadata={SHA256: sha256}, create_only=True,
                )  # fmt: skip
            except Precondition:
                there = self.store.head(key)
                if there is None:
                    continue  # a 409 for a write that did not land (a racing writer's)
                if there.metadata.get(SHA256) == sha256:
                    return False  # the same bytes: another run's upload, or this one's
                raise ConflictError(
                    f"{self.final_url(filename)} holds other bytes than the build's "
                    f"({sha256[:12]}...); nothing of commit {self.commit_id.sha[:12]} is "
                    "public",
                    hint="a commit's files never change: rebuild the commit with the same "
                    "SOURCE_DATE_EPOCH and toolchain pins, or publish another commit",
                ) from None
            if self.on_upload is not None:
                self.on_upload(filename, len(data))
            return True
        raise self._busy(key)

    def _busy(self, key: str) -> PublishError:
        return PublishError(
            f"{self.store.bucket.describe()}/{key}: {CONDITIONAL_ATTEMPTS} conditional "
            "writes were refused (409/412) and nothing is there",
            hint="another run is writing the same commit: run this one again when it is done",
        )

    def _put_new_page(self, page: Page) -> None:
        """Write `page` where nothing is yet (Precondition where something is)."""
        self.store.put(
            page.key, page.body, content_type=page.content_type,
            cache_control=page.cache_control, create_only=True,
        )  # fmt: skip

    def _create_page(self, page: Page, *, look_first: bool) -> None:
        """Write one of the commit's pages unless it is there with these bytes (`look_first`:
        ask first, on a re-run); one there with other bytes is a ConflictError."""
        if look_first:
            there = self.store.head(page.key)
            if there is not None and there.etag == page.md5:
                return
        for _ in range(CONDITIONAL_ATTEMPTS):
            try:
                self._put_new_page(page)
                return
            except Precondition:
                there = self.store.head(page.key)
                if there is None:
                    continue  # a 409 for a write that did not land
                if there.etag == page.md5:
                    return
                raise ConflictError(
                    f"{self.store.bucket.describe()}/{page.key} is another index page than "
                    "this commit's files make",
                    hint="a commit's pages never change: remove the commit's directory to "
                    "publish it again",
                ) from None
        raise self._busy(page.key)

    # --- committing: the state, /nightly/, retention ---

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        shape = self.shape(plan)
        files = self.files(plan)
        pins = frozenset(Version(v) for v in self.bucket_pins())
        rule = replace(self.retention, pins=self.retention.pins | pins)
        pages = nightly_pages(self.prefix, self.commit_id.sha, self.project, files)
        last: list[tuple[NightlyState, Completion | None]] = []

        def change(state: NightlyState) -> NightlyState | None:
            if state.kept_commit(self.commit_id.sha):
                last[:] = [(state, None)]  # a re-run: the commit is complete already
                return None
            done = completed(
                state, commit=self.commit_id, shape=shape, files=files,
                pages={p.key: p.md5 for p in pages}, rule=rule, now=int(self.clock()),
            )  # fmt: skip
            last[:] = [(state, done)]
            if done.promoted and set(shape.labels) - set(state.roots):
                self._write_roots(shape.labels)
                return with_roots(done.state, shape.labels)
            return done.state

        state = self.swap(change)
        before, done = last[0]
        written = 0
        old = before.nightly
        serves = state.nightly is not None and state.nightly.commit == self.commit_id.sha
        if done is not None and done.promoted:
            written = self.move_nightly(pages, state, dict(old.pages) if old else {})
        elif serves:
            written = self.move_nightly(pages, state, {}, look_first=True)  # a re-run mends
        pruned = self.prune_afresh(state, rule.pins)
        self.promotion = Promotion(
            state=self.read_state().state, promoted=serves, pruned=pruned, pages_written=written
        )
        return tuple(replace(d, url=self.final_url(d.entry.filename)) for d in plan.decisions)

    def prune_afresh(self, state: NightlyState, pins: Collection[Version]) -> tuple[Pruning, ...]:
        """Archive or delete what `state` (as this run wrote or read it) lists for pruning,
        decided again here: never the commit being published, a kept, uploading or pinned
        one, nor one the /nightly/ pages link as the bucket holds them now; then the done
        pruning leaves the state (compare-and-swap)."""
        if not state.pruning:
            return ()
        served = self.served_commits(state)
        if served is None:
            self.notes.append(
                "pruned nothing: a /nightly/ page could not be read back, so what it links "
                "is not known (the next run tries again)"
            )
            return ()
        delete, spared = deletions(state, publishing=self.commit_id.sha, pins=pins, served=served)
        for entry, why in spared:
            if why not in ("kept by the state", "being uploaded", "being published by this run"):
                self.notes.append(f"not pruned: {entry.commit[:12]} ({why})")
        pruned = self.prune(delete, state)
        done = {p.commit for p in pruned}
        self.swap(lambda now: settled(now, done))
        return pruned

    def served_commits(self, state: NightlyState) -> set[str] | None:
        """The commits the /nightly/ pages link, read back: one listing of `nightly/`, a
        page whose ETag is the MD5 of the pointer's page (or of a root page) read as that,
        any other page read (GET) for the commit directories it links. None: a page
        could not be read."""
        pointer = state.nightly
        known: dict[str, str | None] = {
            p.key: None for p in root_pages(self.prefix, self.project, state.roots)
        }
        if pointer is not None:
            ours = nightly_pages(self.prefix, pointer.commit, self.project, pointer.files)
            known.update({p.key: pointer.commit for p in ours})
            md5s = {p.key: p.md5 for p in ours}
        else:
            md5s = {}
        md5s.update({p.key: p.md5 for p in root_pages(self.prefix, self.project, state.roots)})
        served: set[str] = set()
        for key, etag in self.store.list(self.prefix + NIGHTLY_DIR).items():
            if md5s.get(key) == etag:
                commit = known.get(key)
                served |= {commit} if commit else set()
                continue
            stored = self.store.get(key, most=MAX_PAGE_BYTES)
            if stored is None:
                continue  # gone since the listing
            if len(stored.data) > MAX_PAGE_BYTES:
                return None
            served |= {m.decode() for m in _LINKED.findall(stored.data)}
        return served

    def _write_roots(self, labels: Sequence[str]) -> None:
        for page in root_pages(self.prefix, self.project, labels):
            try:
                self._put_new_page(page)
            except Precondition:
                continue  # written by an earlier run: a root page only names the project

    def move_nightly(
        self,
        pages: Sequence[Page],
        state: NightlyState,
        expected: Mapping[str, str],
        *,
        look_first: bool = False,
    ) -> int:
        """Write the /nightly/ pages of `state`'s pointer, each over the page the previous
        promotion wrote (`expected`: the ETags it recorded); a page that turns out to be
        another's is read (HEAD) and written over only where an older promotion wrote it
        (`look_first`: read each first, a re-run mending what its first run left).
        Returns how many pages were written."""
        pointer = state.nightly
        if pointer is None:
            return 0
        written = 0
        for page in pages:
            etag = expected.get(page.key)
            if look_first:
                there = self.store.head(page.key)
                if there is not None and _generation(there.metadata) >= pointer.generation:
                    continue
                etag = there.etag if there is not None else None
            for _ in range(CAS_ATTEMPTS):
                try:
                    self.store.put(
                        page.key, page.body, content_type=page.content_type,
                        cache_control=page.cache_control,
                        metadata={GENERATION: str(pointer.generation)},
                        create_only=etag is None, if_match=etag,
                    )  # fmt: skip
                    written += 1
                    break
                except Precondition:
                    there = self.store.head(page.key)
                    if there is None:
                        etag = None
                        continue
                    if _generation(there.metadata) >= pointer.generation:
                        break  # this promotion's page, or a newer one's
                    etag = there.etag
        return written

    def bucket_pins(self) -> list[str]:
        """The versions the keep-list object names (one a line; `#` starts a comment),
        read once a run."""
        if self._pins is None:
            self._pins = self._read_pins()
        return self._pins

    def _read_pins(self) -> list[str]:
        if self.keep_list_object is None:
            return []
        stored = self.store.get(self.prefix + self.keep_list_object, most=MAX_KEEP_LIST_BYTES)
        if stored is None:
            return []
        data = stored.data
        if len(data) > MAX_KEEP_LIST_BYTES:
            data = data[: data.rfind(b"\n", 0, MAX_KEEP_LIST_BYTES) + 1]
            self.notes.append(
                f"{self.keep_list_object}: past {MAX_KEEP_LIST_BYTES // 2**20} MiB: the rest "
                "is not read"
            )
        pins, ignored = [], 0
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            problem = keep_list_problem(text)
            if problem is not None:
                ignored += 1
                if ignored <= MAX_NOTES:
                    self.notes.append(f"{self.keep_list_object}:{number}: ignored: {problem}")
                continue
            pins.append(text)
        if ignored > MAX_NOTES:
            self.notes.append(
                f"{self.keep_list_object}: {ignored - MAX_NOTES} more lines ignored "
                f"({ignored} in all)"
            )
        return pins

    def prune(self, fallen: Sequence[Pruning], state: NightlyState) -> tuple[Pruning, ...]:
        """Archive (the wheels, copied under the archive prefix) or delete each fallen
        commit; every object of it is deleted, in one request per commit."""
        for pruning in fallen:
            shape = state.shapes[pruning.shape]
            if pruning.action == "archive":
                for name in shape.wheel_names(pruning.time):
                    self.store.copy(
                        file_key(self.prefix, pruning.commit, name),
                        archive_key(self.prefix, self.archive_prefix, pruning.commit, name),
                    )
            keys = commit_keys(self.prefix, pruning.commit, pruning.time, shape, self.project)
            self.store.delete(keys)
        return tuple(fallen)


def _generation(metadata: Mapping[str, str]) -> int:
    value = metadata.get(GENERATION, "")
    # ASCII digits, no more than a counter holds (`²` is a digit to isdigit, 5000 of them
    # are past int()'s limit): anything else is a page this channel did not write
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else -1
