"""`release verify`: every published URL resolves to the exact bytes that were built.

From `<dist>/published.json` (written by `release publish`) and the manifest, it checks:
- download: each file's URL answers 200 after redirects, with the manifest's size and
  sha256. Redirects are followed by hand so that an `Authorization` header is never sent
  to another host than the one it was meant for (release assets redirect to storage);
- listing: the PyPI JSON/simple API lists each PyPI file with the same sha256;
- index: every link of each GitHub-variant index resolves and matches its `#sha256=`, and
  each built file is listed with its sha256;
- pip: per cell, `pip install --dry-run --report` against the published index picks
  exactly the expected filename for the cell's platform.

Requests run concurrently (bounded) with bounded retries for propagation delay and one
deadline for the whole run. `verify` returns a `VerifyReport`; the command turns failures
into a VerifyError after printing the report.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx
from packaging.utils import parse_wheel_filename

from release.errors import ConfigError, shown
from release.fsutil import read_json
from release.manifest import Manifest
from release.publish.index import ACCEPT, ListedFile, parse_project_page, project_page_url
from release.publish.pypi import basic_auth, mask, secret_values

DEFAULT_CONCURRENCY = 16  # GitHub allows 100 concurrent requests; stay well under
PIP_CONCURRENCY = 2
RETRY_STATUSES = frozenset({404, 408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, kw_only=True)
class PublishedFile:
    filename: str
    sha256: str
    size: int
    url: str
    destination: str
    kind: str
    index_url: str | None
    arch: str
    local_label: str | None


@dataclass(frozen=True, kw_only=True)
class Published:
    project: str
    version: str
    files: tuple[PublishedFile, ...]


@dataclass(frozen=True, kw_only=True)
class Check:
    subject: str  # a filename or an index URL
    check: str  # download | listing | index | pip
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
    concurrency: int = DEFAULT_CONCURRENCY
    attempts: int = 5
    deadline_s: float = 300.0
    backoff_s: float = 1.0
    pip: bool = True
    index_overrides: Mapping[str, str] | None = None  # destination name -> index URL


# --- Reading what was published. ---


def read_record(path: Path, manifest: Manifest) -> Published:
    """The publish record, checked against the manifest (the manifest's sha256 wins)."""
    data = read_json(path, "publish record", "run `release publish` first (it writes it)")
    built = manifest.by_filename()
    files = []
    problems = []
    raw_files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(raw_files, list):
        raise ConfigError(
            [f"{path}: 'files' is missing or not a list"],
            hint="run `release publish` again to rewrite it",
        )
    for index, raw in enumerate(raw_files):
        where = f"{path}: files[{index}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: not an object")
            continue
        name, url, index_url = raw.get("filename"), raw.get("url"), raw.get("index_url")
        if not isinstance(name, str) or name not in built:
            problems.append(f"{where}: {shown(name)} is not in the manifest")
            continue
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            problems.append(f"{where}.url: {shown(url)} is not an http(s) URL")
            continue
        if index_url is not None and (
            not isinstance(index_url, str) or not index_url.startswith(("https://", "http://"))
        ):
            problems.append(f"{where}.index_url: {shown(index_url)} is not an http(s) URL")
            continue
        entry = built[name]
        files.append(
            PublishedFile(
                filename=name,
                sha256=entry.sha256,
                size=entry.size,
                url=url,
                destination=entry.destination.name,
                kind=entry.destination.kind,
                index_url=index_url,
                arch=entry.arch,
                local_label=entry.local_label,
            )
        )
    if problems:
        raise ConfigError(problems, hint="the record and the manifest are from different builds")
    if not files:
        raise ConfigError([f"{path}: lists no files"], hint="run `release publish` first")
    return Published(project=manifest.project, version=manifest.version, files=tuple(files))


def with_overrides(published: Published, overrides: Mapping[str, str]) -> Published:
    """`--index-url NAME=URL` (or a label: `cu129=URL`) replaces where pip looks."""
    if not overrides:
        return published
    files = []
    for f in published.files:
        url = overrides.get(f.destination) or overrides.get(f.local_label or "") or f.index_url
        files.append(PublishedFile(**{**vars(f), "index_url": url}))
    return Published(project=published.project, version=published.version, files=tuple(files))


# --- HTTP with bounded retries and manual redirects. ---


@dataclass(frozen=True, kw_only=True)
class Fetched:
    status: int | None
    body: bytes | None  # only when asked to keep it
    size: int
    sha256: str
    url: str  # the last URL of the redirect chain
    content_type: str
    error: str | None = None


class Fetcher:
    """GETs with redirects followed by hand: an Authorization header goes only to the origin
    it was configured for, and never past a redirect to another origin."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        bearer: Mapping[str, str],  # origin -> token sent up front (GitHub)
        basic: Mapping[str, httpx.BasicAuth],  # origin -> credentials sent after a 401
        secrets: Sequence[str],
        attempts: int,
        backoff_s: float,
        deadline: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.bearer = bearer
        self.basic = basic
        self.secrets = secrets
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.deadline = deadline
        self.sleep = sleep
        self.requests = 0
        self._lock = threading.Lock()

    def get(self, url: str, *, keep: bool = False, accept: str | None = None) -> Fetched:
        last: Fetched | None = None
        for attempt in range(self.attempts):
            last = self._once(url, keep=keep, accept=accept)
            retry = last.error is not None or last.status in RETRY_STATUSES
            if not retry or attempt + 1 == self.attempts:
                break
            wait = self.backoff_s * 2**attempt
            if time.monotonic() + wait > self.deadline:
                break
            self.sleep(wait)
        assert last is not None  # noqa: S101  # attempts >= 1
        return last

    def _once(self, url: str, *, keep: bool, accept: str | None) -> Fetched:
        origin = _origin(url)
        authorization = None
        if origin in self.bearer:
            authorization = f"Bearer {self.bearer[origin]}"
        current = url
        tried_basic = False
        for _ in range(10):
            headers = {"Accept": accept} if accept else {}
            if authorization and _origin(current) == origin:
                headers["Authorization"] = authorization
            try:
                with self._lock:
                    self.requests += 1
                with self.client.stream(
                    "GET", current, headers=headers, follow_redirects=False
                ) as response:
                    if response.is_redirect and "location" in response.headers:
                        location = urljoin(current, response.headers["location"])
                        if _origin(location) != _origin(current):
                            authorization = None  # never re-sent, even if it comes back
                        current = location
                        continue
                    if (
                        response.status_code == 401
                        and not tried_basic
                        and _origin(current) in self.basic
                    ):
                        tried_basic = True
                        auth = self.basic[_origin(current)]
                        request = self.client.build_request("GET", current)
                        authorization = next(auth.auth_flow(request)).headers["Authorization"]
                        origin = _origin(current)
                        continue
                    digest = hashlib.sha256()
                    size = 0
                    chunks = []
                    for chunk in response.iter_bytes():
                        digest.update(chunk)
                        size += len(chunk)
                        if keep:
                            chunks.append(chunk)
                    return Fetched(
                        status=response.status_code,
                        body=b"".join(chunks) if keep else None,
                        size=size,
                        sha256=digest.hexdigest(),
                        url=current,
                        content_type=response.headers.get("content-type", ""),
                    )
            except httpx.HTTPError as error:
                return Fetched(
                    status=None,
                    body=None,
                    size=0,
                    sha256="",
                    url=current,
                    content_type="",
                    error=mask(f"{type(error).__name__}: {error}", self.secrets),
                )
        return Fetched(
            status=None, body=None, size=0, sha256="", url=current, content_type="",
            error="more than 10 redirects",
        )  # fmt: skip


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


# --- The checks (pure given what was fetched). ---


def download_check(file: PublishedFile, fetched: Fetched) -> Check:
    if fetched.error or fetched.status != 200:
        what = fetched.error or f"HTTP {fetched.status}"
        return Check(subject=file.filename, check="download", ok=False, detail=what, url=file.url)
    if fetched.size != file.size:
        detail = f"{fetched.size} bytes, built {file.size}"
        return Check(subject=file.filename, check="download", ok=False, detail=detail, url=file.url)
    if fetched.sha256 != file.sha256:
        detail = f"sha256 {fetched.sha256[:12]}..., built {file.sha256[:12]}..."
        return Check(subject=file.filename, check="download", ok=False, detail=detail, url=file.url)
    return Check(
        subject=file.filename, check="download", ok=True, detail="size and sha256 match",
        url=file.url,
    )  # fmt: skip


def listing_checks(
    files: Sequence[PublishedFile], listed: Mapping[str, ListedFile], what: str, page: str
) -> list[Check]:
    checks = []
    for file in files:
        found = listed.get(file.filename)
        if found is None:
            checks.append(Check(subject=file.filename, check=what, ok=False,
                                detail="not listed", url=page))  # fmt: skip
        elif found.remote.sha256 != file.sha256:
            got = found.remote.sha256 or f"no sha256 ({found.hash_name or 'no hash'})"
            checks.append(Check(subject=file.filename, check=what, ok=False,
                                detail=f"listed with sha256 {got[:16]}", url=page))  # fmt: skip
        else:
            checks.append(Check(subject=file.filename, check=what, ok=True,
                                detail="listed with the same sha256", url=page))  # fmt: skip
    return checks


def link_check(name: str, listed: ListedFile, fetched: Fetched, page: str) -> Check:
    subject = f"{page} -> {name}"
    if fetched.error or fetched.status != 200:
        detail = f"link does not resolve: {fetched.error or f'HTTP {fetched.status}'}"
        return Check(subject=subject, check="index", ok=False, detail=detail,
                     url=listed.remote.url)  # fmt: skip
    if listed.remote.sha256 is None:
        return Check(subject=subject, check="index", ok=False, detail="link has no #sha256=",
                     url=listed.remote.url)  # fmt: skip
    if fetched.sha256 != listed.remote.sha256:
        detail = f"#sha256={listed.remote.sha256[:12]}... but the file is {fetched.sha256[:12]}..."
        return Check(subject=subject, check="index", ok=False, detail=detail,
                     url=listed.remote.url)  # fmt: skip
    return Check(subject=subject, check="index", ok=True, detail="resolves, hash matches",
                 url=listed.remote.url)  # fmt: skip


def pip_command(
    python: str, *, index_url: str, project: str, version: str, platform: str, target: Path,
    report: Path,
) -> list[str]:  # fmt: skip
    return [
        python, "-m", "pip", "--isolated", "--disable-pip-version-check", "install",
        "--dry-run", "--ignore-installed", "--no-deps", "--no-cache-dir",
        "--only-binary=:all:", "--report", str(report), "--target", str(target),
        "--index-url", index_url, "--platform", platform, "--python-version", "3.12",
        "--implementation", "cp", f"{project}=={version}",
    ]  # fmt: skip


def picked_filename(report: object) -> str | None:
    """The file `pip install --report` chose (the first install item's URL basename)."""
    if not isinstance(report, dict):
        return None
    items = report.get("install")
    if not isinstance(items, list) or not items:
        return None
    url = items[0].get("download_info", {}).get("url", "")
    return unquote(str(url).rsplit("/", 1)[-1].split("#", 1)[0]) or None


# --- The edge: run everything. ---


def verify(
    published: Published,
    environ: Mapping[str, str],
    settings: VerifySettings,
    *,
    client: httpx.Client | None = None,
    python: str = sys.executable,
    sleep: Callable[[float], None] = time.sleep,
) -> VerifyReport:
    secrets = secret_values(environ)
    deadline = time.monotonic() + settings.deadline_s
    token = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN")
    github_origins = {_origin(f.url) for f in published.files if f.kind == "github"}
    bearer = dict.fromkeys(github_origins, token) if token else {}
    basic: dict[str, httpx.BasicAuth] = {}
    pypi_auth = basic_auth(environ, "")
    if pypi_auth is not None:
        for f in published.files:
            if f.kind == "pypi":
                basic[_origin(f.url)] = pypi_auth
                if f.index_url:
                    basic[_origin(f.index_url)] = pypi_auth
    own = client is None
    http = client or httpx.Client(
        timeout=httpx.Timeout(60.0, connect=10.0),
        limits=httpx.Limits(max_connections=settings.concurrency),
    )
    fetcher = Fetcher(
        http, bearer=bearer, basic=basic, secrets=secrets, attempts=settings.attempts,
        backoff_s=settings.backoff_s, deadline=deadline, sleep=sleep,
    )  # fmt: skip
    checks: list[Check] = []
    try:
        with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
            downloads = dict(
                zip(
                    [f.url for f in published.files],
                    pool.map(fetcher.get, [f.url for f in published.files]),
                    strict=True,
                )
            )
            checks += [download_check(f, downloads[f.url]) for f in published.files]
            pages: dict[str, list[PublishedFile]] = {}
            for f in published.files:
                if f.index_url:
                    pages.setdefault(project_page_url(f.index_url, published.project), []).append(f)
            fetched_pages = dict(
                zip(
                    pages,
                    pool.map(lambda u: fetcher.get(u, keep=True, accept=ACCEPT), pages),
                    strict=True,
                )
            )
            links: dict[str, tuple[str, str, ListedFile]] = {}
            for page, files in pages.items():
                fetched = fetched_pages[page]
                what = "listing" if files[0].kind == "pypi" else "index"
                if fetched.error or fetched.status != 200 or fetched.body is None:
                    detail = f"index page: {fetched.error or f'HTTP {fetched.status}'}"
                    checks += [Check(subject=f.filename, check=what, ok=False, detail=detail,
                                     url=page) for f in files]  # fmt: skip
                    continue
                try:
                    listed = parse_project_page(fetched.body, fetched.content_type, page)
                except ValueError as error:
                    checks += [Check(subject=f.filename, check=what, ok=False,
                                     detail=f"unreadable index page: {error}", url=page)
                               for f in files]  # fmt: skip
                    continue
                checks += listing_checks(files, listed, what, page)
                if what == "index":
                    for name, item in listed.items():
                        links[f"{page}#{name}"] = (page, name, item)
            link_urls = sorted({item.remote.url for _, _, item in links.values()} - set(downloads))
            downloads.update(zip(link_urls, pool.map(fetcher.get, link_urls), strict=True))
            for page, name, item in links.values():
                checks.append(link_check(name, item, downloads[item.remote.url], page))
        if settings.pip:
            checks += _pip_checks(published, basic, python, secrets, settings)
    finally:
        if own:
            http.close()
    return VerifyReport(project=published.project, version=published.version, checks=tuple(checks))


def with_credentials(url: str, basic: Mapping[str, httpx.BasicAuth]) -> str:
    """`url` with user:password in it when its origin is a private index (pypiserver -a
    list,download). pip keys credentials by host AND port (a netrc file would key them by
    host only, and hand them to every server on 127.0.0.1); pip redacts them in its output."""
    auth = basic.get(_origin(url))
    if auth is None:
        return url
    header = next(auth.auth_flow(httpx.Request("GET", url))).headers["Authorization"]
    user, _, password = base64.b64decode(header.split(" ", 1)[1]).decode().partition(":")
    parts = urlsplit(url)
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.netloc}"
    return parts._replace(netloc=netloc).geturl()


def _pip_checks(
    published: Published,
    basic: Mapping[str, httpx.BasicAuth],
    python: str,
    secrets: Sequence[str],
    settings: VerifySettings,
) -> list[Check]:
    cells = [f for f in published.files if f.index_url]
    with tempfile.TemporaryDirectory(prefix="release-verify-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TWINE_"))}
        env = {k: v for k, v in env.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "NETRC")}

        def one(index: int, file: PublishedFile) -> Check:
            platform = parse_wheel_filename(file.filename)[3]
            tag = sorted(t.platform for t in platform)[0]
            work = root / f"cell-{index}"
            work.mkdir()
            report = work / "report.json"
            assert file.index_url is not None  # noqa: S101  # filtered above
            cmd = pip_command(
                python,
                index_url=with_credentials(file.index_url, basic),
                project=published.project,
                version=published.version,
                platform=tag,
                target=work / "target",
                report=report,
            )
            for attempt in range(settings.attempts):
                proc = subprocess.run(
                    cmd, env=env, capture_output=True, text=True, check=False,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
                if proc.returncode == 0 or attempt + 1 == settings.attempts:
                    break
                time.sleep(settings.backoff_s * 2**attempt)
            subject = f"{file.filename}"
            if proc.returncode != 0:
                lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
                detail = mask(" | ".join(lines[-2:]) or f"exit {proc.returncode}", secrets)
                return Check(subject=subject, check="pip", ok=False,
                             detail=f"pip failed: {detail}", url=file.index_url)  # fmt: skip
            picked = picked_filename(json.loads(report.read_text(encoding="utf-8")))
            ok = picked == file.filename
            detail = f"picks {picked}" if ok else f"picks {picked}, expected {file.filename}"
            return Check(subject=subject, check="pip", ok=ok, detail=detail, url=file.index_url)

        with ThreadPoolExecutor(max_workers=PIP_CONCURRENCY) as pool:
            return list(pool.map(lambda pair: one(*pair), enumerate(cells)))


def report_json(report: VerifyReport) -> dict[str, Any]:
    return {
        "project": report.project,
        "version": report.version,
        "ok": not report.failed,
        "checks": [vars(c) for c in report.checks],
    }
