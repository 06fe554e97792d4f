"""One `release audit`: any PEP 503/691 index's pages and wheels, checked by the inspection a
wheel as served goes through (release.inspection.served) and the index rules
(release.inspection.indexrules), with no matrix and no credentials.

Bounded on a huge index: project pages are read one at a time, each parsed once into its
links and its body dropped; a page's wheels are read by at most `concurrency` workers, each
downloading one wheel into a scratch file, inspecting it member by member and deleting it
before the next, so that no more than `concurrency` wheels are ever on disk and none in
memory. A wheel's download (its retries included) has `file_timeout_s`, the whole audit
`timeout_s`, its inspection included (one still running then is left to its thread): the
wheels that limit leaves unread are named, never silently skipped.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from release.audit.report import AuditReport, Unchecked
from release.audit.sources import Source, has_userinfo
from release.credentials import without_credentials
from release.defaults import (
    AUDIT_ATTEMPTS,
    AUDIT_CONCURRENCY,
    AUDIT_FILE_TIMEOUT_S,
    AUDIT_TIMEOUT_S,
    PYPI_SIMPLE,
    WHEEL_SIZE_LIMIT,
)
from release.inspection.devicecode import elf_lister
from release.inspection.fatbin import lister
from release.inspection.findings import Finding, finding
from release.inspection.indexrules import (
    CHECKED_HASHES,
    ListedDeviceCode,
    ListedWheel,
    device_code_gaps,
    duplicates,
    listed_wheel,
    listing_findings,
    missing_arches,
    unindexed_variants,
)
from release.inspection.served import ServedWheel, inspect_served
from release.inspection.torchcuda import TorchIndex
from release.remote import httpclient as http
from release.remote.httpclient import Download
from release.remote.retry import Deadline, RetryPolicy
from release.remote.simple_index import ACCEPT, ListedFile, parse_index_page, project_page_url
from release.workers import Workers

PAGE_TIMEOUT_S = 120.0  # one index page or torch metadata file
CREDENTIALS_IN_LINK = "the link carries credentials (user:password@): release audit sends none"


_LOG = logging.getLogger("release.audit")


@dataclass(frozen=True, kw_only=True)
class AuditSettings:
    concurrency: int = AUDIT_CONCURRENCY
    file_timeout_s: float = AUDIT_FILE_TIMEOUT_S
    timeout_s: float = AUDIT_TIMEOUT_S
    attempts: int = AUDIT_ATTEMPTS
    projects: tuple[str, ...] = ()  # read only these projects' pages of each root index
    torch_index: str | None = PYPI_SIMPLE  # where a torch requirement's CUDA is read; None: not
    cuobjdump: Path | None = None  # lists device code where given


@dataclass(frozen=True, kw_only=True)
class _Read:
    """One wheel URL as read: None where the time limit left it unread."""

    url: str
    download: Download | None
    served: ServedWheel | None = None
    digests: Mapping[str, str] = field(default_factory=dict)  # other than sha256, as asked


@dataclass
class _Tally:
    """What the audit has found so far (kept by the one thread that reads results)."""

    findings: list[Finding] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)
    unchecked: list[Unchecked] = field(default_factory=list)
    not_reached: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    files: int = 0
    wheels: dict[str, list[ListedWheel]] = field(default_factory=dict)
    device: dict[str, list[ListedDeviceCode]] = field(default_factory=dict)

    def read(self, read: _Read, filename: str, hashes: Sequence[tuple[str, ListedFile]]) -> None:
        """A wheel's findings; `hashes` are the (page, link) listings of its URL."""
        self.files += 1
        if read.download is None:
            self.not_reached.append(read.url)
            return
        self.checked["download"] += 1
        if not read.download.ok or read.served is None:
            why = read.download.error or f"HTTP {read.download.status}"
            self.findings.append(
                finding("download", filename, read.url, f"does not download: {why}")
            )
            return
        digests = {**read.digests, "sha256": read.download.sha256}
        for page, listed in hashes:
            if listed.hash_name in digests and (listed.sha256 or listed.digest):
                self.checked["hash"] += 1
            if listed.metadata_sha256 is not None:
                self.checked["hash"] += 1
            self.findings += listing_findings(
                page, listed, digests=digests, size=read.download.size,
                metadata_sha256=read.served.metadata_sha256,
            )  # fmt: skip
        served = read.served
        self.findings += served.findings
        self.checked.update(served.checked)
        self.unchecked += [Unchecked(rule=r, file=filename, why=w) for r, w in served.unchecked]
        wheel = listed_wheel(filename, read.url)
        if served.device_listed and wheel is not None:
            self.device.setdefault(wheel.project, []).append(
                ListedDeviceCode(
                    wheel=wheel, filename=filename, url=read.url, sms=served.sms, ptx=served.ptx
                )
            )

    def index_rules(self) -> None:
        """The rules across a project's wheels, every page of it together."""
        for project, wheels in sorted(self.wheels.items()):
            self.checked["missing-arch"] += len(wheels)
            self.checked["unindexed-variant"] += len(wheels)
            self.findings += missing_arches(project, wheels)
            self.findings += unindexed_variants(project, wheels)
        for project, device in sorted(self.device.items()):
            self.findings += device_code_gaps(project, device)


class _Reader:
    """The audit's reads: pages, and wheels into scratch files, under its time limits."""

    def __init__(
        self,
        *,
        client: http.Client,
        settings: AuditSettings,
        deadline: Deadline,
        scratch: Path,
        environ: Mapping[str, str],
        clock: Callable[[], float],
    ) -> None:
        self.client, self.settings, self.deadline = client, settings, deadline
        self.scratch, self.clock = scratch, clock
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self.torch_cuda = (
            TorchIndex(settings.torch_index, self.small).cuda_of if settings.torch_index else None
        )
        env = without_credentials(environ)
        self.listers = (
            (lister(settings.cuobjdump, env), elf_lister(settings.cuobjdump, env))
            if settings.cuobjdump is not None
            else None
        )

    def small(
        self,
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> Download:
        """A page, a metadata file or a range of a wheel's bytes, held in memory."""
        if has_userinfo(url):
            return Download(status=None, url=url, error=CREDENTIALS_IN_LINK)
        left = max(min(PAGE_TIMEOUT_S, self.deadline.remaining()), 0.001)
        policy = RetryPolicy(attempts=self.settings.attempts, initial_delay=1.0, total=left)
        return http.fetch(
            self.client, url, keep=keep, accept=accept, policy=policy,
            deadline=Deadline(left, self.clock), byte_range=byte_range,
        )  # fmt: skip

    def page(self, url: str) -> tuple[tuple[ListedFile, ...], tuple[tuple[str, str], ...]] | str:
        """A page's links and (for a root index) its projects, or why it could not be read."""
        got = self.small(url, keep=True, accept=ACCEPT)
        if not got.ok or got.body is None:
            return f"the page does not load: {got.error or f'HTTP {got.status}'}"
        try:
            page = parse_index_page(got.body, got.content_type, url)
        except ValueError as error:
            return f"not a simple index page ({error})"
        return page.files, page.projects

    def wheel(self, url: str, filename: str, hashes: frozenset[str] = frozenset()) -> _Read:
        """The wheel at `url` downloaded into a scratch file, inspected, and deleted; its
        `hashes` other than sha256 (md5, sha512: what its links carry) read from that file."""
        if self.deadline.remaining() <= 0:
            return _Read(url=url, download=None)
        if has_userinfo(url):
            return _Read(
                url=url, download=Download(status=None, url=url, error=CREDENTIALS_IN_LINK)
            )
        left = min(self.settings.file_timeout_s, self.deadline.remaining())
        policy = RetryPolicy(attempts=self.settings.attempts, initial_delay=1.0, total=left)
        with self._lock:
            path = self.scratch / f"{next(self._numbers)}.whl"
        try:
            got = http.fetch(
                self.client, url, into=path, policy=policy, deadline=Deadline(left, self.clock),
                max_bytes=WHEEL_SIZE_LIMIT, identity=True,
            )  # fmt: skip
            if not got.ok:  # cut short by the audit's own limit: unread, not the index's fault
                return _Read(url=url, download=None if self.deadline.remaining() <= 0 else got)
            list_fatbin, list_elf = self.listers or (None, None)
            served = inspect_served(
                filename, path, url=url, list_fatbin=list_fatbin, list_elf=list_elf,
                torch_cuda=self.torch_cuda,
            )  # fmt: skip
            return _Read(url=url, download=got, served=served, digests=_digests(path, hashes))
        finally:
            path.unlink(missing_ok=True)


def _digests(path: Path, names: frozenset[str]) -> dict[str, str]:
    """The hex digests `names` (pip's hashes other than sha256) of the file at `path`."""
    wanted = sorted(names & set(CHECKED_HASHES) - {"sha256"})
    if not wanted:
        return {}
    digests = {name: hashlib.new(name) for name in wanted}
    with path.open("rb") as stream:
        while chunk := stream.read(2**20):
            for digest in digests.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in digests.items()}


# a page that lists nothing passes no check: an index emptied, or a page that is no index
EMPTY_PAGE = "the page lists no file and no project: nothing there to install or audit"


def _pages_of(
    source: Source, reader: _Reader, tally: _Tally
) -> Iterator[tuple[str, tuple[ListedFile, ...]]]:
    """The project pages a source names, each with its links; a page that cannot be read
    is a `download` finding."""
    if reader.settings.projects:
        urls = [project_page_url(source.url, name) for name in reader.settings.projects]
    else:
        urls = [source.url]
    for url in urls:
        read = _page(url, reader, tally)
        if read is None:
            continue
        files, projects = read
        if not projects and not files:
            tally.findings.append(finding("download", url, url, EMPTY_PAGE))
        if not projects:
            yield url, files
            continue
        for _, project_url in projects:  # a root index: every project it lists
            inner = _page(project_url, reader, tally)
            if inner is not None and not inner[0]:
                tally.findings.append(finding("download", project_url, project_url, EMPTY_PAGE))
            if inner is not None:
                yield project_url, inner[0]


def _page(
    url: str, reader: _Reader, tally: _Tally
) -> tuple[tuple[ListedFile, ...], tuple[tuple[str, str], ...]] | None:
    """The page's links and projects; None where it could not be read: a `download` finding,
    or unread where the audit's own time limit cut it short (not the index's fault): once
    it has passed, no page is asked for (a root of a million projects took an hour of
    requests cut to a millisecond each)."""
    if reader.deadline.remaining() <= 0:
        tally.not_reached.append(url)
        return None
    read = reader.page(url)
    if isinstance(read, str) and reader.deadline.remaining() <= 0:
        tally.not_reached.append(url)
        return None
    tally.checked["download"] += 1
    if isinstance(read, str):
        tally.findings.append(finding("download", url, url, read))
        return None
    return read


def _audit_page(
    page: str, files: Sequence[ListedFile], reader: _Reader, pool: Workers, tally: _Tally
) -> None:
    tally.pages.append(page)
    tally.checked["duplicate"] += len(files)
    tally.findings += duplicates(page, files)
    by_url: dict[str, list[ListedFile]] = {}
    for listed in files:
        if not listed.name.endswith(".whl"):
            continue
        by_url.setdefault(listed.url, []).append(listed)
        wheel = listed_wheel(listed.name, page)
        if wheel is not None:
            tally.wheels.setdefault(wheel.project, []).append(wheel)
    _LOG.info("release audit: %s: %d wheel%s", page, len(by_url), "" if len(by_url) == 1 else "s")
    reads = pool.map_within(
        lambda item: reader.wheel(
            item[0], item[1][0].name, frozenset(one.hash_name or "" for one in item[1])
        ),
        by_url.items(),
        reader.deadline.remaining,
    )
    for (url, listings), done in zip(by_url.items(), reads, strict=True):
        read = done or _Read(url=url, download=None)  # its inspection outran the time limit
        tally.read(read, listings[0].name, [(page, listed) for listed in listings])


def audit(
    sources: Sequence[Source],
    settings: AuditSettings,
    environ: Mapping[str, str],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> AuditReport:
    """Every page and wheel `sources` name, audited; findings are in the report, the caller
    decides what they mean."""
    start = clock()
    deadline = Deadline(settings.timeout_s, clock)
    tally = _Tally()
    with (
        http.client(concurrency=settings.concurrency) as client,
        Workers(settings.concurrency) as pool,
        # a read a stopped command leaves running (release.workers) may still write there
        tempfile.TemporaryDirectory(prefix="release-audit-", ignore_cleanup_errors=True) as scratch,
    ):
        reader = _Reader(
            client=client, settings=settings, deadline=deadline, scratch=Path(scratch),
            environ=environ, clock=clock,
        )  # fmt: skip
        for source in sources:
            if source.kind == "page":
                for page, files in _pages_of(source, reader, tally):
                    _audit_page(page, files, reader, pool, tally)
        given = [s for s in sources if s.kind == "wheel"]
        reads = pool.map_within(
            lambda s: reader.wheel(s.url, s.filename), given, deadline.remaining
        )
        for one, done in zip(given, reads, strict=True):
            read = done or _Read(url=one.url, download=None)
            pinned = ListedFile(
                name=one.filename, url=one.url, sha256=one.sha256, size=None,
                hash_name="sha256" if one.sha256 else None, requires_python=None,
                metadata_sha256=None,
            )  # fmt: skip
            tally.read(read, one.filename, [(f"the #sha256= of {one.given}", pinned)])
    tally.index_rules()
    return AuditReport(
        sources=tuple(s.url for s in sources),
        pages=tuple(tally.pages),
        files=tally.files,
        findings=tuple(tally.findings),
        checked=dict(tally.checked),
        unchecked=tuple(tally.unchecked),
        not_reached=tuple(tally.not_reached),
        seconds=clock() - start,
    )
