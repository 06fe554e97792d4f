"""`release verify`: every published URL resolves to the exact bytes that were built.

From what was published (`published.json` and the manifest, or a release re-derived from
a tag), it checks:
- download: each file's URL answers 200 after redirects, with the built size and sha256;
  likewise each companion (the PEP 658 `.metadata`, the NCCL files, the release manifest);
- listing: the PyPI simple API lists each PyPI file with the same sha256;
- index: every link of each GitHub-variant index resolves and matches its `#sha256=`, its
  `.metadata` matches `data-core-metadata`, its `data-provenance` serves a PEP 740
  provenance object signed by the release's workflow (Sigstore, verified) for the file's
  sha256, and each built file is listed with its sha256;
- pip: per cell, `pip install --dry-run --report` against the published index picks
  exactly the expected filename for the cell's platform.

Requests go through release.remote.httpclient (credentials scoped to their origins, redirects
followed by httpx, which drops `Authorization` when leaving the origin), run
concurrently, bounded, with retries for propagation delay under one deadline. `verify`
returns a `VerifyReport`; the command turns failures into a VerifyError.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import release.records.published as published_record
from release import proc, workers
from release.credentials import isolated_env, mask
from release.defaults import RELEASE_WORKFLOW, VERIFY_CONCURRENCY
from release.destinations.reach import Reach, merged
from release.destinations.registry import find_kind
from release.fsutil import json_document, read_document
from release.provenance.attestation import checked_provenance
from release.provenance.signature import PUBLIC_GOOD, Checked, ExpectedSigner, reason
from release.records.published import SDIST_PURPOSE, Published, PublishedFile
from release.records.sdistfile import sdist_archive_problems
from release.remote.httpclient import (
    Client,
    Download,
    OriginAuth,
    fetch,
    origin_of,
)
from release.remote.retry import Deadline, RetryPolicy
from release.remote.simple_index import ACCEPT, ListedFile, parse_project_page, project_page_url
from release.wheelfile import WheelName
from release.workers import Workers

PIP_CONCURRENCY = 2
PROPAGATION_STATUSES = frozenset({404})  # a new file may take a moment to appear


@dataclass(frozen=True, kw_only=True)
class Check:
    subject: str  # a filename or an index URL
    check: str  # download | listing | index | metadata | pip | provenance
    ok: bool
    detail: str
    url: str | None = None


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    project: str
    version: str
    checks: tuple[Check, ...]

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)


@dataclass(frozen=True, kw_only=True)
class VerifySettings:
    concurrency: int = VERIFY_CONCURRENCY
    attempts: int = 5
    deadline_s: float = 300.0
    backoff_s: float = 1.0
    pip: bool = True
    provenance: bool = True
    require_provenance: bool = False  # "no provenance" fails
    provenance_workflow: str = RELEASE_WORKFLOW  # the workflow an attestation must name
    # the reusable workflow that signs for it (owner/name/path[@ref]); None: that one itself
    provenance_signer_workflow: str | None = None
    # whose workflow signs where the matrix names no GitHub destination (a PyPI-only project)
    provenance_repository: str | None = None


# --- The checks (pure given what was fetched). ---


def download_check(subject: str, url: str, size: int, sha256: str, got: Download) -> Check:
    def result(ok: bool, detail: str) -> Check:
        return Check(subject=subject, check="download", ok=ok, detail=detail, url=url)

    if not got.ok:
        return result(False, got.error or f"HTTP {got.status}")
    if size >= 0 and got.size != size:  # a size of -1: not known, the sha256 decides
        return result(False, f"{got.size} bytes, built {size}")
    if got.sha256 != sha256:
        return result(False, f"sha256 {got.sha256[:12]}..., built {sha256[:12]}...")
    return result(True, "size and sha256 match")


def listing_checks(
    files: Sequence[PublishedFile | published_record.PublishedCompanion],
    listed: Mapping[str, ListedFile],
    what: str,
    page: str,
) -> list[Check]:
    checks = []
    for file in files:
        found = listed.get(file.filename)
        if found is None:
            ok, detail = False, "not listed"
        elif found.sha256 != file.sha256:
            got = found.sha256 or f"no sha256 ({found.hash_name or 'no hash'})"
            ok, detail = False, f"listed with sha256 {got[:16]}"
        else:
            ok, detail = True, "listed with the same sha256"
        checks.append(Check(subject=file.filename, check=what, ok=ok, detail=detail, url=page))
    return checks


def link_check(name: str, listed: ListedFile, got: Download, page: str) -> Check:
    subject = f"{page} -> {name}"

    def result(ok: bool, detail: str) -> Check:
        return Check(subject=subject, check="index", ok=ok, detail=detail, url=listed.url)

    if not got.ok:
        return result(False, f"link does not resolve: {got.error or f'HTTP {got.status}'}")
    if listed.sha256 is None:
        return result(False, "link has no #sha256=")
    if got.sha256 != listed.sha256:
        detail = f"#sha256={listed.sha256[:12]}... but the file is {got.sha256[:12]}..."
        return result(False, detail)
    return result(True, "resolves, hash matches")


def metadata_check(name: str, listed: ListedFile, got: Download, page: str) -> Check:
    """PEP 658: `<url>.metadata` serves the bytes `data-core-metadata` names."""
    url = listed.url + ".metadata"
    subject = f"{page} -> {name}.metadata"
    if not got.ok:
        detail = f"does not resolve: {got.error or f'HTTP {got.status}'}"
        return Check(subject=subject, check="metadata", ok=False, detail=detail, url=url)
    if got.sha256 != listed.metadata_sha256:
        detail = f"sha256 {got.sha256[:12]}..., the index says {str(listed.metadata_sha256)[:12]}"
        return Check(subject=subject, check="metadata", ok=False, detail=detail, url=url)
    return Check(subject=subject, check="metadata", ok=True, detail="matches", url=url)


NO_SIGNER = (
    "provenance not checked: the matrix names no GitHub repository whose workflow must sign "
    "(--matrix)"
)


def provenance_verdict(checked: Sequence[Checked] | None, *, required: bool) -> tuple[bool, str]:
    """One file's provenance from its attestations, each checked: ok when one's signature
    verifies and names the expected signer and the file; "no provenance" (a failure only
    when `required`) when none was found; otherwise a failure, whether refused or
    unverified (one that could not be checked here at all: it never counts as verified,
    nor as absent, since anyone can write one)."""
    if not checked:
        return not required, "no provenance"
    verified = [one for one in checked if one.problem is None]
    if verified:
        return True, f"provenance: {verified[0].signer}, signature verified ({PUBLIC_GOOD})"
    refused = [one.problem for one in checked if one.verifiable and one.problem]
    if refused:
        more = f" (and {len(refused) - 1} more refused)" if len(refused) > 1 else ""
        return False, f"provenance refused: {reason(refused[0] or '')}{more}"
    return False, f"provenance {reason(checked[0].problem or 'unverified')}"


def provenance_link_check(
    name: str,
    listed: ListedFile,
    got: Download,
    page: str,
    *,
    signer: ExpectedSigner | None,
    required: bool,
) -> Check:
    """PEP 740: the index's provenance link serves a provenance object whose attestation
    is signed by `signer` and attests the file's sha256."""
    url = listed.provenance_url or ""
    subject = f"{page} -> {name} provenance"

    def result(ok: bool, detail: str) -> Check:
        return Check(subject=subject, check="provenance", ok=ok, detail=detail, url=url)

    if not got.ok or got.body is None:
        return result(False, f"does not resolve: {got.error or f'HTTP {got.status}'}")
    if signer is None:
        return result(not required, NO_SIGNER)
    ok, detail = provenance_verdict(
        checked_provenance(got.body, listed.sha256 or "", signer), required=required
    )
    return result(ok, detail)


def pip_command(
    python: str, *, index_url: str, project: str, version: str, platform: str, target: Path,
    report: Path,
) -> list[str]:  # fmt: skip
    # --retries 0: the run is tried again as a whole, `--attempts` times in all (tries per
    # URL), where pip alone would try each request 6 times (7.75 s of backoff) every run.
    return [
        python, "-m", "pip", "--isolated", "--disable-pip-version-check", "--retries", "0",
        "install",
        "--dry-run", "--ignore-installed", "--no-deps", "--no-cache-dir",
        "--only-binary=:all:", "--report", str(report), "--target", str(target),
        "--index-url", index_url, "--platform", platform, "--python-version", "3.12",
        "--implementation", "cp", f"{project}=={version}",
    ]  # fmt: skip


def picked_file(report: object) -> tuple[str | None, str | None]:
    """The file `pip install --report` chose (the first install item's URL basename), and
    the sha256 pip reports of the bytes it took (None where it reports none)."""
    if not isinstance(report, dict):
        return None, None
    items = report.get("install")
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        return None, None
    info = items[0].get("download_info")
    info = info if isinstance(info, dict) else {}
    url = info.get("url", "")
    name = unquote(str(url).rsplit("/", 1)[-1].split("#", 1)[0]) or None
    archive = info.get("archive_info")
    hashes = archive.get("hashes") if isinstance(archive, dict) else None
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    return name, sha256.lower() if isinstance(sha256, str) else None


# --- Credentials scoped to their origins. ---


def origin_auth(published: Published, reach: Reach) -> OriginAuth:
    """The credentials each destination kind says its files take, by origin: the GitHub
    token for the GitHub-hosted files' origin; the index credentials for the PyPI files'
    and indexes' origins, sent only when those ask."""
    by_kind: dict[str, list[PublishedFile]] = {}
    for file in published.files:
        by_kind.setdefault(file.kind, []).append(file)
    return merged(
        kind.file_auth(files, reach)
        for name, files in by_kind.items()
        if (kind := find_kind(name)) is not None
    )


def with_credentials(url: str, auth: OriginAuth) -> str:
    """`url` with user:password in it when its origin is a private index: pip keys
    credentials by host and port (a netrc file would key them by host only, and hand them
    to every server on 127.0.0.1), and redacts them in its output."""
    creds = auth.basic.get(origin_of(url))
    if creds is None:
        return url
    parts = urlsplit(url)
    user = quote(creds.username, safe="")
    password = quote(creds.password.reveal(), safe="")
    return parts._replace(netloc=f"{user}:{password}@{parts.netloc}").geturl()


# --- Running everything. ---


class Once:
    """A GET per URL (and the way it is asked) in one verification: the download check of a
    file and the index link to it share one request."""

    def __init__(self, get: Callable[..., Download]) -> None:
        self._get = get
        self._done: dict[tuple[str, bool, str | None], Download] = {}
        self._lock = threading.Lock()

    def __call__(self, url: str, *, keep: bool = False, accept: str | None = None) -> Download:
        key = (url, keep, accept)
        with self._lock:
            found = self._done.get(key)
        if found is not None:
            return found
        got = self._get(url, keep=keep, accept=accept)
        with self._lock:
            self._done[key] = got
        return got


def getter(
    client: Client,
    settings: VerifySettings,
    secrets: Sequence[str],
    sleep: Callable[[float], None] = time.sleep,
) -> Once:
    """The GET every check of one verification goes through: retried for propagation
    delay under one deadline, once per URL."""
    policy = RetryPolicy(
        attempts=settings.attempts,
        initial_delay=settings.backoff_s,
        max_delay=max(settings.backoff_s * 16, 1.0),
        total=settings.deadline_s,
    )
    deadline = Deadline(settings.deadline_s, time.monotonic)

    def get(url: str, *, keep: bool = False, accept: str | None = None) -> Download:
        return fetch(
            client,
            url,
            keep=keep,
            accept=accept,
            retry_statuses=PROPAGATION_STATUSES,
            policy=policy,
            deadline=deadline,
            sleep=sleep,
            secrets=secrets,
        )

    return Once(get)


def verify(
    published: Published,
    reach: Reach,
    settings: VerifySettings,
    *,
    http: Client | None = None,
    python: str = sys.executable,
    sleep: Callable[[float], None] = time.sleep,
    signer: ExpectedSigner | None = None,
    get: Once | None = None,
) -> VerifyReport:
    """Every check of `published`; `signer` is who must have signed the provenance objects
    the indexes link (None: they are not checked, and say so); `get` (from `getter`) lets a
    caller run more checks on what was fetched without asking again."""
    auth = origin_auth(published, reach)
    secrets = (*reach.secrets, *auth.secrets)
    own = http is None and get is None
    client = http
    if get is None:
        client = http or reach.http(auth, concurrency=settings.concurrency)
        get = getter(client, settings, secrets, sleep)
    fetched = get
    checks: list[Check] = []
    try:
        with Workers(settings.concurrency) as pool:
            checks += _download_checks(published, pool, fetched)
            checks += _index_checks(
                published, pool, fetched, settings=settings if settings.provenance else None,
                signer=signer,
            )  # fmt: skip
        if settings.pip:
            checks += _pip_checks(
                published,
                auth=auth,
                python=python,
                secrets=secrets,
                settings=settings,
                environ=reach.environ,
                sleep=sleep,
            )
    finally:
        if own and client is not None:
            client.close()
    return VerifyReport(project=published.project, version=published.version, checks=tuple(checks))


Get = Callable[..., Download]


def _download_checks(published: Published, pool: Workers, get: Get) -> list[Check]:
    subjects = [(f.filename, f.url, f.size, f.sha256) for f in published.files]
    subjects += [(c.filename, c.url, c.size, c.sha256) for c in published.companions]
    sdists = {c.filename for c in published.companions if c.purpose == SDIST_PURPOSE}
    fetched = list(pool.map(lambda s: get(s[1], keep=s[0] in sdists), subjects))
    checks = []
    for (name, url, size, sha256), got in zip(subjects, fetched, strict=True):
        check = download_check(name, url, size, sha256, got)
        checks.append(sdist_check(check, got, published) if name in sdists and check.ok else check)
    return checks + [
        Check(subject=name, check="download", ok=False, detail=UNLISTED)
        for name in published.unlisted
    ]


UNLISTED = "never published: the publish record lacks it, though it lists the wheels it goes with"


def sdist_check(check: Check, got: Download, published: Published) -> Check:
    """The download check of an sdist whose bytes are the built ones, failed where they are
    not an sdist of the release (release.records.sdistfile: its members, its PKG-INFO)."""
    body = got.body or b""
    problems = sdist_archive_problems(body, check.subject, published.project, published.version)
    if not problems:
        return check
    return replace(check, ok=False, detail=f"not the release's sdist: {problems[0]}")


def _index_checks(
    published: Published,
    pool: Workers,
    get: Get,
    *,
    settings: VerifySettings | None,  # None: no provenance checks
    signer: ExpectedSigner | None,
) -> list[Check]:
    checks: list[Check] = []
    pages: dict[str, list[PublishedFile]] = {}
    for f in published.files:
        if f.index_url:
            pages.setdefault(project_page_url(f.index_url, published.project), []).append(f)
    fetched = dict(
        zip(pages, pool.map(lambda u: get(u, keep=True, accept=ACCEPT), pages), strict=True)
    )
    links: list[tuple[str, ListedFile]] = []
    for page, files in pages.items():
        got = fetched[page]
        what = _index_check(files[0].kind)
        if not got.ok or got.body is None:
            detail = f"index page: {got.error or f'HTTP {got.status}'}"
            checks += [
                Check(subject=f.filename, check=what, ok=False, detail=detail, url=page)
                for f in files
            ]
            continue
        try:
            listed = parse_project_page(got.body, got.content_type, page)
        except ValueError as error:
            detail = f"unreadable index page: {error}"
            checks += [
                Check(subject=f.filename, check=what, ok=False, detail=detail, url=page)
                for f in files
            ]
            continue
        checks += listing_checks([*files, *_sdists_of(published, files)], listed, what, page)
        if what == "index":
            links += [(page, item) for item in listed.values()]
    urls = sorted({item.url for _, item in links})
    resolved = dict(zip(urls, pool.map(get, urls), strict=True))
    checks += [link_check(item.name, item, resolved[item.url], page) for page, item in links]
    with_metadata = [(page, item) for page, item in links if item.metadata_sha256]
    metadata = list(pool.map(lambda pair: get(pair[1].url + ".metadata"), with_metadata))
    checks += [
        metadata_check(item.name, item, got, page)
        for (page, item), got in zip(with_metadata, metadata, strict=True)
    ]
    if settings is not None:
        # as release.verify.provenance.provenance_required: asked for, or the release attested
        required = settings.require_provenance or any(f.attested for f in published.files)
        linked = [(page, item) for page, item in links if item.provenance_url]
        served = list(pool.map(lambda pair: get(pair[1].provenance_url or "", keep=True), linked))
        checks += [
            provenance_link_check(item.name, item, got, page, signer=signer, required=required)
            for (page, item), got in zip(linked, served, strict=True)
        ]
    return checks


def _index_check(kind: str) -> str:
    """`listing` where the index page is the destination's own listing (PyPI's), `index`
    where it is an index of links to files hosted elsewhere."""
    found = find_kind(kind)
    return found.index_check if found is not None else "index"


def takes_sdist(file: PublishedFile) -> bool:
    """Whether the release's sdist is published beside `file`: a wheel of the default
    variant on the kind of destination the sdist goes to (PyPI)."""
    kind = find_kind(file.kind)
    return kind is not None and kind.takes_sdist and file.local_label is None


def _sdists_of(
    published: Published, files: Sequence[PublishedFile]
) -> list[published_record.PublishedCompanion]:
    """The sdist, on the PyPI page of the default variant's wheels (the one it goes to)."""
    if not any(takes_sdist(f) for f in files):
        return []
    return [c for c in published.companions if c.purpose == SDIST_PURPOSE]


def _pip_checks(
    published: Published,
    *,
    auth: OriginAuth,
    python: str,
    secrets: Sequence[str],
    settings: VerifySettings,
    environ: Mapping[str, str],
    sleep: Callable[[float], None],
) -> list[Check]:
    cells = [f for f in published.files if f.index_url]
    env = isolated_env(environ)
    with tempfile.TemporaryDirectory(prefix="release-verify-") as tmp:
        root = Path(tmp)

        def one(index: int, file: PublishedFile) -> Check:
            tags = WheelName.parse(file.filename).tags
            work = root / f"cell-{index}"
            work.mkdir()
            report = work / "report.json"
            assert file.index_url is not None  # noqa: S101  # filtered above
            cmd = pip_command(
                python,
                index_url=with_credentials(file.index_url, auth),
                project=published.project,
                version=published.version,
                platform=sorted(t.platform for t in tags)[0],
                target=work / "target",
                report=report,
            )
            done = proc.run(cmd, env=env, secrets=secrets, separate_stderr=True)
            for attempt in range(1, settings.attempts):
                if done.ok:
                    break
                sleep(settings.backoff_s * 2 ** (attempt - 1))
                done = proc.run(cmd, env=env, secrets=secrets, separate_stderr=True)
            if not done.ok:
                tail = proc.one_line_tail(done.stderr or done.output, 2)
                detail = f"pip failed: {mask(tail, secrets)}"
                return Check(
                    subject=file.filename, check="pip", ok=False, detail=detail, url=file.index_url
                )
            picked, sha256 = picked_file(json_document(read_document(report), "pip's report"))
            ok = picked == file.filename and sha256 in (None, file.sha256)
            detail = f"picks {picked}" if ok else f"picks {picked}, expected {file.filename}"
            if picked == file.filename and not ok:  # another file of that name, served to pip
                detail = f"picks {picked} of sha256 {sha256}, built {file.sha256}"
            return Check(
                subject=file.filename, check="pip", ok=ok, detail=detail, url=file.index_url
            )

        with ThreadPoolExecutor(max_workers=PIP_CONCURRENCY) as pool:
            asked = [pool.submit(one, number, cell) for number, cell in enumerate(cells)]
            return [workers.result(future) for future in asked]


def report_json(report: VerifyReport) -> dict[str, Any]:
    return {
        "project": report.project,
        "version": report.version,
        "ok": not report.failed,
        "checks": [vars(c) for c in report.checks],
    }
