"""A stand-in GitHub REST server (API version 2022-11-28) for tests, on 127.0.0.1.

githubkit 0.16.1 and httpx talk HTTP to it exactly as to api.github.com; only the base
URL differs. Three origins share one thread-safe state:

- **API** ``standin.api_url`` (``http://127.0.0.1:A``): the REST API, and the web role of
  github.com (``/{owner}/{repo}/releases/download/{tag}/{name}``). The same API is served
  under ``/api/v3`` (``standin.ghe_api_url``) as GitHub Enterprise does; responses then
  carry Enterprise-style URLs and an ``upload_url`` under ``/api/uploads`` on the same host.
- **uploads** ``standin.uploads_url``: ``POST /repos/{o}/{r}/releases/{id}/assets?name=&label=``.
  The same POST on the API origin answers 404, like api.github.com.
- **storage** ``standin.storage_url``: signed, expiring download URLs (``...&exp=..&sig=..``).
  400 when an ``Authorization`` header is sent, 403 for a bad or expired signature.

``GitHubStandIn(enterprise=True)`` is a GitHub Enterprise Server instead, on four origins
that share nothing with github.com: the API (``standin.api_url`` = ``http://127.0.0.1:A/api/v3``;
no other path answers there), uploads (``upload_url`` is
``http://localhost:U/api/uploads/repos/...``), the web host of ``html_url`` and
``browser_download_url`` (``http://localhost:W/{owner}/{repo}/releases/download/{tag}/{name}``,
302 to storage) and storage. ``LoggedRequest.origin`` says which one a request reached.

``add_repo(name, immutable_releases=True)`` turns on GitHub's immutable releases: a
release published there carries ``"immutable": true``; then uploads answer 422 ``Cannot
upload assets to an immutable release.`` (GitHub's words), deleting or renaming an asset
422 likewise, an edit other than the title and notes 422 ``Validation Failed``, and the tag
can never be released again. A draft is not immutable: it takes assets until published.

Usage::

    from tests.github_standin import GitHubStandIn, Fault

    with GitHubStandIn() as gh:
        gh.add_repo("k3-org/k3-kernels")
        client = githubkit.GitHub(gh.token, base_url=gh.api_url)
        ...
        gh.releases("k3-org/k3-kernels")       # tuple[Release], drafts included
        gh.assets(release_id)                  # tuple[Asset], any state, with .data bytes
        gh.request_log                         # tuple[LoggedRequest]

As a pytest fixture (function-scoped, fresh state, repository ``DEFAULT_REPO`` =
``k3-org/k3-kernels`` already added); the conftest.py of tests/integration and tests/full
re-export it::

    from tests.github_standin.fixtures import github_standin  # in a conftest.py

    def test_publish(github_standin: GitHubStandIn) -> None: ...

Public API of :class:`GitHubStandIn`:

- ``api_url``, ``ghe_api_url``, ``uploads_url``, ``storage_url``, ``web_url``
- ``token``: a valid token of user ``release-bot`` with push access. ``add_token(login,
  push=True)`` makes more; ``push=False`` reads but cannot write (403) nor see drafts.
  An unknown token gets 401 ``Bad credentials``; none at all is an anonymous caller
  (60 requests an hour, no drafts, writes 401 ``Requires authentication``).
  ``Authorization: Bearer <t>`` and ``Authorization: token <t>`` both work.
- ``add_repo("owner/name", private=False)``
- ``releases(repo)``, ``release(release_id)``, ``assets(release_id)``: frozen records from
  ``records.py`` (:class:`Release`, :class:`Asset`; ``Asset.data`` holds the exact bytes,
  ``Asset.digest`` is ``sha256:<hex>`` once uploaded).
- ``add_asset(release_id, name, data, state="uploaded")``: put an asset in place directly,
  e.g. one with other bytes to provoke a conflict, or a ``"starter"`` leftover.
- ``request_log`` / ``clear_log()``: :class:`LoggedRequest` (method, origin, path, query,
  headers with the Authorization value masked, body_length read, status, fault).
- ``faults``: a :class:`FaultSet`; ``faults.add(Fault(method="POST", path=r"/assets$",
  origin="uploads", action="store_then", status=502))``. Actions ``"status"``,
  ``"store_then"``, ``"reset"``; ``count`` firings; a ``"status"`` answer that stalls
  (``hold``), is huge (``repeat``) or trickles (``trickle``), and ``faults.sent(fault)``,
  what of it went out before the client hung up; see ``faults.py``. Helpers:
  ``primary_rate_limit``, ``rate_limit_429_retry_after``, ``secondary_403_retry_after``,
  ``secondary_403_message``, ``secondary_429_bare``, ``server_errors``.

What it reproduces: drafts are 404 by tag (even with a token) and listed only for a
token with push access; a draft's ``html_url``/``browser_download_url`` use
``untagged-<hex>`` and change when ``PATCH {"draft": false}`` publishes it; download URLs of
a draft 404 anonymously; exact 422 ``already_exists`` bodies for a duplicate published tag
and a duplicate asset name; uploads need ``Content-Type`` (else 400 ``Invalid
Content-Type``) and ``Content-Length`` (else 400 ``Bad Content-Length``) and keep the
bytes verbatim; odd asset names are renamed as GitHub does (``records.github_asset_name``);
every asset has ``state`` and ``digest``; lists paginate with ``per_page`` (default 30, at
most 100) and absolute ``Link`` headers (``/repositories/{id}/...`` form, like GitHub);
every API answer has ``x-ratelimit-*`` headers, an ``ETag`` and honours
``If-None-Match`` with 304; ``Accept: application/octet-stream`` on an asset answers 302 to
storage.

Seen while testing githubkit 0.16.1 against it: ``GitHub(..., auto_retry=True)`` sleeps
60 s when a rate-limit answer's wait works out to zero (a reset already past), and
``Authorization`` is dropped by httpx on the cross-origin redirect to storage, which is
what lets ``follow_redirects=True`` downloads work with a token.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlencode, urlsplit

from .faults import Fault, FaultSet
from .records import (
    Asset,
    JsonObject,
    Links,
    Release,
    Repo,
    User,
    asset_json,
    release_json,
    repo_json,
)
from .state import (
    ASSET_DOCS,
    ATTESTATION_DOCS,
    DOCS,
    RELEASE_DOCS,
    ApiError,
    State,
    not_found,
)

__all__ = ["DEFAULT_REPO", "GitHubStandIn", "LoggedRequest"]

T = TypeVar("T")

SUPPORTED_API_VERSIONS = ("2022-11-28", "2026-03-10")
DEFAULT_LOGIN = "release-bot"
DEFAULT_REPO = "k3-org/k3-kernels"
MAX_PER_PAGE = 100
DEFAULT_PER_PAGE = 30

_OWNER_REPO = r"(?:repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)|repositories/(?P<repo_id>\d+))"
_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("rate_limit", r"^/rate_limit$"),
        ("repo", rf"^/{_OWNER_REPO}$"),
        ("releases", rf"^/{_OWNER_REPO}/releases$"),
        ("latest", rf"^/{_OWNER_REPO}/releases/latest$"),
        ("by_tag", rf"^/{_OWNER_REPO}/releases/tags/(?P<tag>.+)$"),
        ("asset", rf"^/{_OWNER_REPO}/releases/assets/(?P<asset_id>\d+)$"),
        ("release", rf"^/{_OWNER_REPO}/releases/(?P<release_id>\d+)$"),
        ("release_assets", rf"^/{_OWNER_REPO}/releases/(?P<release_id>\d+)/assets$"),
        ("attestations", rf"^/{_OWNER_REPO}/attestations/(?P<digest>[^/]+)$"),
    )
)
_DOWNLOAD = re.compile(
    r"^/(?P<owner>[^/]+)/(?P<repo>[^/]+)/releases/download/(?P<tag>.+)/(?P<name>[^/]+)$"
)
_LATEST_DOWNLOAD = re.compile(
    r"^/(?P<owner>[^/]+)/(?P<repo>[^/]+)/releases/latest/download/(?P<name>[^/]+)$"
)
_UPLOAD = re.compile(
    r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/releases/(?P<release_id>\d+)/assets$"
)
_OBJECT = re.compile(r"^/objects/(?P<asset_id>\d+)/(?P<name>[^/]+)$")

# (origin, host name in its URLs; None: the bound address). A GitHub Enterprise Server
# here is four hosts, none of them github.com: the API (``/api/v3``), uploads
# (``/api/uploads``), the web host of the download URLs, and storage; "localhost" (also
# 127.0.0.1) gives the uploads and web hosts another name than the API's.
_GITHUB_ORIGINS: tuple[tuple[str, str | None], ...] = (
    ("api", None),
    ("uploads", None),
    ("storage", None),
)
_ENTERPRISE_ORIGINS: tuple[tuple[str, str | None], ...] = (
    ("api", None),
    ("uploads", "localhost"),
    ("web", "localhost"),
    ("storage", None),
)


_RANGE = re.compile(r"bytes=(?P<first>\d{1,18})-(?P<last>\d{0,18})")


@dataclass(frozen=True, kw_only=True)
class LoggedRequest:
    """One request as the stand-in saw it. ``status`` is None when the socket was reset."""

    method: str
    origin: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body_length: int
    status: int | None
    fault: Fault | None

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


@dataclass(frozen=True, kw_only=True)
class _Answer:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    close: bool = False


@dataclass(frozen=True, kw_only=True)
class _Request:
    method: str
    origin: str
    path: str
    query: Mapping[str, list[str]]
    raw_query: str
    headers: Mapping[str, str]
    body: bytes

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def _json_answer(status: int, data: object, headers: Mapping[str, str] | None = None) -> _Answer:
    body = json.dumps(data, separators=(",", ":")).encode()
    return _Answer(
        status=status,
        body=body,
        headers={
            "Content-Type": "application/json; charset=utf-8",
            **(headers or {}),
        },
    )


def _error_answer(error: ApiError) -> _Answer:
    return _json_answer(error.status, error.body, error.headers)


def _primary_limit(request: _Request) -> ApiError:
    who = "user" if request.header("authorization") else "anonymous caller"
    return ApiError(
        403,
        {
            "message": f"API rate limit exceeded for {who}. If you reach out to GitHub Support "
            "for help, please include the request ID C0DE:1A2B:3C4D5E:6F7A8B:6751F00D.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            "status": "403",
        },
    )


def _request_id() -> str:
    return ":".join(secrets.token_hex(n).upper() for n in (2, 2, 3, 3, 4))


class _RateCounter:
    """Primary rate-limit bookkeeping: one hourly window per caller."""

    def __init__(self, limit: int, anonymous_limit: int) -> None:
        self._limits = {True: limit, False: anonymous_limit}
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, int]] = {}

    def hit(self, caller: User | None, *, count: bool = True) -> tuple[dict[str, str], bool]:
        """The rate-limit headers after this request, and whether it is over the limit."""
        key = "" if caller is None else f"{caller.login}:{caller.id}"
        limit = self._limits[caller is not None]
        now = int(time.time())
        with self._lock:
            reset, used = self._windows.get(key, (now + 3600, 0))
            if now >= reset:
                reset, used = now + 3600, 0
            exceeded = used >= limit
            if count and not exceeded:
                used += 1
            self._windows[key] = (reset, used)
        return {
            "x-ratelimit-limit": str(limit),
            "x-ratelimit-remaining": str(limit - used),
            "x-ratelimit-reset": str(reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }, exceeded


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, standin: GitHubStandIn, origin: str, host: str, shown_host: str | None = None
    ) -> None:
        self.standin = standin
        self.origin = origin
        self.shown_host = shown_host
        super().__init__((host, 0), _Handler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{self.shown_host or host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "github.com"
    sys_version = ""
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the stand-in keeps its own request log."""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; with Nagle on, the body waits for the
        # client's delayed ACK of the headers (40 ms on Linux) on every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.standin._track(self.connection, threading.current_thread(), add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.standin._track(self.connection, threading.current_thread(), add=False)

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read(self, limit: int | None = None) -> tuple[bytes, bool]:
        """The request body (at most ``limit`` bytes) and whether all of it was read."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(), True
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b"", True
        try:
            length = int(length_header)
        except ValueError:
            return b"", False
        wanted = length if limit is None else min(limit, length)
        data = self.rfile.read(wanted) if wanted > 0 else b""
        return data, len(data) == length

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = self.rfile.readline(65537)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(65537)

    def _dispatch(self) -> None:
        standin = self.server.standin
        split = urlsplit(self.path)
        headers = {key.lower(): value for key, value in self.headers.items()}
        fault = standin.faults.take(self.command, split.path, self.server.origin)

        if fault is not None and fault.action == "reset":
            declared = headers.get("content-length", "0")
            half = int(declared) // 2 if declared.isdigit() else 0
            body, _ = self._read(fault.read_bytes if fault.read_bytes is not None else half)
            request = self._request(split, headers, body)
            self._leave_partial(fault, request)
            standin._log(request, body_length=len(body), status=None, fault=fault)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return

        body, complete = self._read()
        request = self._request(split, headers, body)
        if fault is not None and fault.action == "status":
            self._leave_partial(fault, request)
            answer = standin._fault_answer(fault, request)
            if fault.hold or fault.repeat != 1 or fault.trickle:
                standin._log(request, body_length=len(body), status=answer.status, fault=fault)
                self._send_slowly(answer, fault)
                return
        else:
            answer = standin._handle(request)
            if fault is not None and fault.action == "store_then":
                answer = standin._fault_answer(fault, request)
        if not complete:
            answer = _Answer(
                status=answer.status, body=answer.body, headers=answer.headers, close=True
            )
        standin._log(request, body_length=len(body), status=answer.status, fault=fault)
        self._send(answer, head_only=self.command == "HEAD")

    def _request(self, split: SplitResult, headers: Mapping[str, str], body: bytes) -> _Request:
        return _Request(
            method=self.command,
            origin=self.server.origin,
            path=split.path,
            raw_query=split.query,
            query=parse_qs(split.query, keep_blank_values=True),
            headers=headers,
            body=body,
        )

    def _leave_partial(self, fault: Fault, request: _Request) -> None:
        if fault.leave_state is not None:
            self.server.standin._leave_partial(fault.leave_state, request)

    def _send(self, answer: _Answer, *, head_only: bool) -> None:
        self.send_response(answer.status)
        for key, value in answer.headers.items():
            self.send_header(key, value)
        if answer.status not in (204, 304):
            self.send_header("Content-Length", str(len(answer.body)))
        if answer.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if not head_only and answer.status not in (204, 304):
            self.wfile.write(answer.body)

    def _send_slowly(self, answer: _Answer, fault: Fault) -> None:
        """`answer` as `fault` says: after `hold` seconds, its body `repeat` times over,
        `trickle` seconds before each; what went out before the client hung up is counted.
        A stopping stand-in cuts every wait short."""
        stopping = self.server.standin._stopping
        if stopping.wait(fault.hold):
            return
        self.send_response(answer.status)
        for key, value in answer.headers.items():
            if key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(answer.body) * fault.repeat))
        self.close_connection = True
        self.send_header("Connection", "close")
        try:
            self.end_headers()
            for _ in range(fault.repeat):
                if stopping.wait(fault.trickle):
                    return
                self.wfile.write(answer.body)
                self.wfile.flush()
                self.server.standin.faults.count_sent(fault, len(answer.body))
        except OSError:  # the client hung up: what it took is counted
            return


def _page_numbers(request: _Request) -> tuple[int, int]:
    def number(name: str, default: int) -> int:
        try:
            return int(request.param(name) or default)
        except ValueError:
            return default

    per_page = number("per_page", DEFAULT_PER_PAGE)
    per_page = DEFAULT_PER_PAGE if per_page < 1 else min(per_page, MAX_PER_PAGE)
    return max(number("page", 1), 1), per_page


class GitHubStandIn:
    """The stand-in GitHub; see the module docstring. Use as a context manager."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        rate_limit: int = 5000,
        anonymous_rate_limit: int = 60,
        signed_url_ttl: int = 300,
        enterprise: bool = False,
    ) -> None:
        self.enterprise = enterprise
        self.state = State()
        self.faults = FaultSet()
        # whether the asset storage answers Range requests (a host that ignores them sends
        # the whole body with 200)
        self.ranges = True
        self.token = self.state.add_token(DEFAULT_LOGIN)
        self._host = host
        self._rates = _RateCounter(rate_limit, anonymous_rate_limit)
        self._signing_key = secrets.token_bytes(32)
        self._signed_url_ttl = signed_url_ttl
        self._log_lock = threading.Lock()
        self._stopping = threading.Event()  # set while stopping: a held answer ends
        self._log_entries: list[LoggedRequest] = []
        self._conn_lock = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._servers: dict[str, _Server] = {}
        self._threads: list[threading.Thread] = []

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> GitHubStandIn:
        if self._servers:
            return self
        self._stopping.clear()
        for origin, shown in _ENTERPRISE_ORIGINS if self.enterprise else _GITHUB_ORIGINS:
            server = _Server(self, origin, self._host, shown)
            thread = threading.Thread(
                target=server.serve_forever,
                name=f"github-{origin}",
                kwargs={"poll_interval": 0.05},
                daemon=True,
            )
            thread.start()
            self._servers[origin] = server
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for server in self._servers.values():
            server.shutdown()
        with self._conn_lock:
            open_connections = dict(self._connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in [*open_connections.values(), *self._threads]:
            thread.join(timeout=5)
        for server in self._servers.values():
            server.server_close()
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> GitHubStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _track(self, conn: socket.socket, thread: threading.Thread, *, add: bool) -> None:
        with self._conn_lock:
            if add:
                self._connections[conn] = thread
            else:
                self._connections.pop(conn, None)

    # -- public surface -----------------------------------------------------------------

    def _base(self, origin: str) -> str:
        if origin not in self._servers:
            raise RuntimeError("the stand-in is not running; use it as a context manager")
        return self._servers[origin].base_url

    @property
    def api_url(self) -> str:
        """The REST API base a client is given (``.../api/v3`` for an enterprise stand-in)."""
        return self._base("api") + ("/api/v3" if self.enterprise else "")

    @property
    def ghe_api_url(self) -> str:
        return self._base("api") + "/api/v3"

    @property
    def web_url(self) -> str:
        return self._base("web" if self.enterprise else "api")

    @property
    def uploads_url(self) -> str:
        return self._base("uploads") + ("/api/uploads" if self.enterprise else "")

    @property
    def storage_url(self) -> str:
        return self._base("storage")

    def add_repo(
        self, full_name: str, *, private: bool = False, immutable_releases: bool = False
    ) -> str:
        """Add a repository; ``immutable_releases`` is GitHub's repository setting (a release
        published from then on is immutable: no asset added, deleted or renamed, no tag moved,
        the tag never reused)."""
        return self.state.add_repo(
            full_name, private=private, immutable_releases=immutable_releases
        ).full_name

    def add_token(self, login: str, *, push: bool = True) -> str:
        return self.state.add_token(login, push=push)

    def releases(self, repo: str) -> tuple[Release, ...]:
        return tuple(self.state.all_releases(repo))

    def release(self, release_id: int) -> Release:
        for repo_releases in self._all_repos_releases():
            for release in repo_releases:
                if release.id == release_id:
                    return release
        raise KeyError(f"no release {release_id}")

    def _all_repos_releases(self) -> list[list[Release]]:
        with self.state.lock:
            names = [r.full_name for r in self.state._repos.values()]
        return [self.state.all_releases(name) for name in names]

    def assets(self, release_id: int) -> tuple[Asset, ...]:
        return tuple(self.state.assets(release_id))

    def add_attestation(self, repo: str, bundle: JsonObject) -> tuple[str, ...]:
        """Serve a (recorded) Sigstore bundle at `/repos/{repo}/attestations/sha256:{hex}`
        for each digest its statement names; those digests."""
        return self.state.add_attestation(repo, bundle)

    def add_asset(
        self,
        release_id: int,
        name: str,
        data: bytes,
        *,
        state: str = "uploaded",
        content_type: str = "application/octet-stream",
        label: str | None = None,
    ) -> Asset:
        release = self.release(release_id)
        uploader = self.state.user(DEFAULT_LOGIN)
        return self.state.store_asset(
            release,
            uploader=uploader,
            name=name,
            label=label,
            content_type=content_type,
            data=data,
            state=state,
        )

    @property
    def request_log(self) -> tuple[LoggedRequest, ...]:
        with self._log_lock:
            return tuple(self._log_entries)

    def clear_log(self) -> None:
        with self._log_lock:
            self._log_entries.clear()

    def _log(
        self, request: _Request, *, body_length: int, status: int | None, fault: Fault | None
    ) -> None:
        shown = []
        for key, value in request.headers.items():
            if key == "authorization":
                scheme = value.split(" ", 1)[0] if " " in value else ""
                shown.append((key, f"{scheme} ***".strip()))
            else:
                shown.append((key, value))
        entry = LoggedRequest(
            method=request.method,
            origin=request.origin,
            path=request.path,
            query=request.raw_query,
            headers=tuple(shown),
            body_length=body_length,
            status=status,
            fault=fault,
        )
        with self._log_lock:
            self._log_entries.append(entry)

    # -- request handling ---------------------------------------------------------------

    def _viewer(self, request: _Request) -> User | None:
        header = request.header("authorization")
        if header is None:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() not in ("token", "bearer") or not token.strip():
            return self.state.viewer("")
        return self.state.viewer(token.strip())

    def _links(self, enterprise: bool) -> Links:
        if self.enterprise:
            return Links(api=self.api_url, web=self.web_url, uploads=self.uploads_url)
        api = self._base("api")
        if enterprise:
            return Links(api=api + "/api/v3", web=api, uploads=api + "/api/uploads")
        return Links(api=api, web=api, uploads=self.uploads_url)

    def _is_web(self, request: _Request) -> bool:
        return request.origin == ("web" if self.enterprise else "api") and bool(
            _DOWNLOAD.match(request.path) or _LATEST_DOWNLOAD.match(request.path)
        )

    def _count(self, request: _Request) -> tuple[dict[str, str], bool]:
        try:
            viewer = self._viewer(request)
        except ApiError:
            viewer = None
        return self._rates.hit(viewer)

    def _handle(self, request: _Request) -> _Answer:
        if request.origin == "storage":
            return self._storage(request)
        if self._is_web(request):
            web = self._web(request)
            if web is not None:
                return web
        if request.origin == "web":
            return _Answer(
                status=404, body=b"Not Found", headers={"Content-Type": "text/plain; charset=utf-8"}
            )
        rate, exceeded = self._count(request)
        if exceeded:
            return self._decorate(request, _error_answer(_primary_limit(request)), rate)
        path, enterprise, uploads = request.path, False, request.origin == "uploads"
        if self.enterprise:
            # every API path is under /api/v3 and every upload under /api/uploads, each on
            # its own host; anything else is the web's 404
            prefix = "/api/uploads/" if uploads else "/api/v3/"
            enterprise = True
            path = path[len(prefix) - 1 :] if path.startswith(prefix) else "/not-an-api-path"
        elif request.origin == "api":
            for prefix, to_uploads in (("/api/v3/", False), ("/api/uploads/", True)):
                if path.startswith(prefix):
                    path, enterprise, uploads = path[len(prefix) - 1 :], True, to_uploads
        try:
            answer = self._api(request, path, enterprise=enterprise, uploads=uploads)
        except ApiError as error:
            answer = _error_answer(error)
        return self._decorate(request, answer, rate)

    def _decorate(
        self, request: _Request, answer: _Answer, rate: Mapping[str, str] | None
    ) -> _Answer:
        """Add what GitHub puts on every API answer (rate limits, request id, ETag)."""
        headers = {**(rate or {}), **answer.headers}
        headers.setdefault("X-GitHub-Request-Id", _request_id())
        headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
        headers.setdefault(
            "X-GitHub-Api-Version-Selected",
            request.header("x-github-api-version") or SUPPORTED_API_VERSIONS[0],
        )
        if request.method in ("GET", "HEAD") and answer.status == 200 and answer.body:
            etag = 'W/"' + hashlib.sha256(answer.body).hexdigest()[:40] + '"'
            headers.update(
                {
                    "ETag": etag,
                    "Cache-Control": "private, max-age=60, s-maxage=60",
                    "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding",
                }
            )
            if etag in [t.strip() for t in (request.header("if-none-match") or "").split(",")]:
                return _Answer(status=304, headers=headers, close=answer.close)
        return _Answer(status=answer.status, body=answer.body, headers=headers, close=answer.close)

    def _fault_answer(self, fault: Fault, request: _Request) -> _Answer:
        headers = {"Content-Type": "application/json; charset=utf-8"} if fault.body else {}
        if fault.reset_in is not None:
            headers["x-ratelimit-reset"] = str(int(time.time()) + fault.reset_in)
        answer = _Answer(
            status=fault.status, body=fault.body_bytes(), headers={**headers, **fault.headers}
        )
        if request.origin == "storage" or self._is_web(request):
            return answer
        rate = self._count(request)[0] if fault.rate_limit_headers else None
        return self._decorate(request, answer, rate)

    def _api(self, request: _Request, path: str, *, enterprise: bool, uploads: bool) -> _Answer:
        viewer = self._viewer(request)
        version = request.header("x-github-api-version")
        if version is not None and version not in SUPPORTED_API_VERSIONS:
            raise ApiError(
                400,
                {
                    "message": f"API version '{version}' is not supported.",
                    "documentation_url": f"{DOCS}/about-the-rest-api/api-versions",
                    "status": "400",
                },
            )
        links = self._links(enterprise)
        if uploads:
            match = _UPLOAD.match(path)
            if match is None or request.method != "POST":
                raise not_found(DOCS)
            return self._upload(request, match, viewer, links)
        for name, pattern in _ROUTES:
            match = pattern.match(path)
            if match is not None:
                return self._route(
                    name, request, match, viewer=viewer, links=links, enterprise=enterprise
                )
        raise not_found(DOCS)

    def _repo(self, match: re.Match[str], viewer: User | None, doc: str) -> Repo:
        if match.group("repo_id"):
            return self.state.repo_by_id(int(match.group("repo_id")), viewer, doc)
        return self.state.repo(
            unquote(match.group("owner")), unquote(match.group("repo")), viewer, doc
        )

    def _payload(self, request: _Request, doc: str) -> Mapping[str, Any]:
        try:
            payload = json.loads(request.body or b"{}")
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ApiError(
                400, {"message": "Problems parsing JSON", "documentation_url": doc, "status": "400"}
            )
        return payload

    def _route(
        self,
        name: str,
        request: _Request,
        match: re.Match[str],
        *,
        viewer: User | None,
        links: Links,
        enterprise: bool,
    ) -> _Answer:
        method = "GET" if request.method == "HEAD" else request.method
        if name == "rate_limit" and method == "GET":
            rate, _ = self._rates.hit(viewer, count=False)
            core = {
                "limit": int(rate["x-ratelimit-limit"]),
                "remaining": int(rate["x-ratelimit-remaining"]),
                "reset": int(rate["x-ratelimit-reset"]),
                "used": int(rate["x-ratelimit-used"]),
                "resource": "core",
            }
            return _json_answer(200, {"resources": {"core": core}, "rate": core})
        if name == "repo" and method == "GET":
            repo = self._repo(match, viewer, f"{DOCS}/repos/repos#get-a-repository")
            return _json_answer(200, repo_json(repo, links, viewer))
        if name == "releases":
            if method == "GET":
                repo = self._repo(match, viewer, f"{RELEASE_DOCS}#list-releases")
                releases = self.state.releases(repo, viewer)
                return self._paginated(
                    request,
                    releases,
                    enterprise=enterprise,
                    link_path=f"/repositories/{repo.id}/releases",
                    render=lambda r: self._release_json(r, repo, links),
                )
            if method == "POST":
                doc = f"{RELEASE_DOCS}#create-a-release"
                repo = self._repo(match, viewer, doc)
                release = self.state.create_release(repo, viewer, self._payload(request, doc))
                data = self._release_json(release, repo, links)
                return _json_answer(201, data, {"Location": data["url"]})
        if name == "latest" and method == "GET":
            doc = f"{RELEASE_DOCS}#get-the-latest-release"
            repo = self._repo(match, viewer, doc)
            return _json_answer(
                200, self._release_json(self.state.latest_release(repo, doc), repo, links)
            )
        if name == "by_tag" and method == "GET":
            doc = f"{RELEASE_DOCS}#get-a-release-by-tag-name"
            repo = self._repo(match, viewer, doc)
            release = self.state.release_by_tag(repo, unquote(match.group("tag")), doc)
            return _json_answer(200, self._release_json(release, repo, links))
        if name == "release":
            release_id = int(match.group("release_id"))
            if method == "GET":
                doc = f"{RELEASE_DOCS}#get-a-release"
                repo = self._repo(match, viewer, doc)
                release = self.state.release(repo, release_id, viewer, doc)
                return _json_answer(200, self._release_json(release, repo, links))
            if method == "PATCH":
                doc = f"{RELEASE_DOCS}#update-a-release"
                repo = self._repo(match, viewer, doc)
                release = self.state.update_release(
                    repo, release_id, viewer, self._payload(request, doc)
                )
                return _json_answer(200, self._release_json(release, repo, links))
            if method == "DELETE":
                repo = self._repo(match, viewer, f"{RELEASE_DOCS}#delete-a-release")
                self.state.delete_release(repo, release_id, viewer)
                return _Answer(status=204)
        if name == "release_assets" and method == "GET":
            doc = f"{ASSET_DOCS}#list-release-assets"
            repo = self._repo(match, viewer, doc)
            release = self.state.release(repo, int(match.group("release_id")), viewer, doc)
            return self._paginated(
                request,
                self.state.assets(release.id),
                enterprise=enterprise,
                link_path=f"/repositories/{repo.id}/releases/{release.id}/assets",
                render=lambda a: asset_json(a, repo, release, links),
            )
        if name == "asset":
            asset_id = int(match.group("asset_id"))
            if method == "GET":
                doc = f"{ASSET_DOCS}#get-a-release-asset"
                repo = self._repo(match, viewer, doc)
                asset, release = self.state.asset(repo, asset_id, viewer, doc)
                if "application/octet-stream" in (request.header("accept") or ""):
                    return _Answer(status=302, headers={"Location": self.signed_url(asset)})
                return _json_answer(200, asset_json(asset, repo, release, links))
            if method == "PATCH":
                doc = f"{ASSET_DOCS}#update-a-release-asset"
                repo = self._repo(match, viewer, doc)
                asset, release = self.state.update_asset(
                    repo, asset_id, viewer, self._payload(request, doc)
                )
                return _json_answer(200, asset_json(asset, repo, release, links))
            if method == "DELETE":
                repo = self._repo(match, viewer, f"{ASSET_DOCS}#delete-a-release-asset")
                self.state.delete_asset(repo, asset_id, viewer)
                return _Answer(status=204)
        if name == "attestations" and method == "GET":
            repo = self._repo(match, viewer, f"{ATTESTATION_DOCS}#list-attestations")
            bundles = self.state.attestations(repo, unquote(match.group("digest")))
            base = links.api.rstrip("/")
            items = [
                {
                    "bundle": bundle,
                    "repository_id": repo.id,
                    "bundle_url": f"{base}/repos/{repo.full_name}/attestations/bundles/{i}",
                }
                for i, bundle in enumerate(bundles, 1)
            ]
            return _json_answer(200, {"attestations": items})
        raise not_found(DOCS)

    def _release_json(self, release: Release, repo: Repo, links: Links) -> JsonObject:
        return release_json(release, repo, self.state.assets(release.id), links)

    def _paginated(
        self,
        request: _Request,
        items: Sequence[T],
        *,
        enterprise: bool,
        link_path: str,
        render: Callable[[T], JsonObject],
    ) -> _Answer:
        page, per_page = _page_numbers(request)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chosen = items[(page - 1) * per_page : page * per_page]
        base = self._links(enterprise).api + link_path
        kept = [(k, v) for k, values in request.query.items() if k != "page" for v in values]

        def url(number: int) -> str:
            return f"<{base}?{urlencode([*kept, ('page', str(number))])}>"

        rels = []
        if page > 1:
            rels.append(f'{url(min(page - 1, last))}; rel="prev"')
        if page < last:
            rels += [f'{url(page + 1)}; rel="next"', f'{url(last)}; rel="last"']
        if page > 1:
            rels.append(f'{url(1)}; rel="first"')
        headers = {"Link": ", ".join(rels)} if rels else {}
        return _json_answer(200, [render(item) for item in chosen], headers)

    # -- uploads ------------------------------------------------------------------------

    def _upload(
        self, request: _Request, match: re.Match[str], viewer: User | None, links: Links
    ) -> _Answer:
        request_id = _request_id()
        doc = f"{ASSET_DOCS}#upload-a-release-asset"
        repo = self.state.repo(
            unquote(match.group("owner")), unquote(match.group("repo")), viewer, doc
        )
        raw_name = request.param("name")
        if not raw_name:
            raise ApiError(
                422,
                {
                    "message": "Validation Failed",
                    "request_id": request_id,
                    "documentation_url": doc,
                    "errors": [
                        {"resource": "ReleaseAsset", "code": "missing_field", "field": "name"}
                    ],
                },
            )
        length = request.header("content-length")
        if length is None or not length.isdigit() or int(length) != len(request.body):
            raise ApiError(
                400, {"message": f"Bad Content-Length: {length or ''}", "request_id": request_id}
            )
        content_type = request.header("content-type") or ""
        if not content_type.strip():
            raise ApiError(
                400,
                {"message": f"Invalid Content-Type: '{content_type}'", "request_id": request_id},
            )
        release, name = self.state.check_upload(
            repo, int(match.group("release_id")), viewer, raw_name, request_id
        )
        assert viewer is not None  # check_upload refuses anonymous callers
        asset = self.state.store_asset(
            release,
            uploader=viewer,
            name=name,
            label=request.param("label"),
            content_type=content_type,
            data=request.body,
            request_id=request_id,
        )
        return _json_answer(201, asset_json(asset, repo, release, links))

    def _leave_partial(self, state: str, request: _Request) -> None:
        """Leave an empty asset in ``state`` where an upload failed, as GitHub can."""
        path = request.path
        if path.startswith("/api/uploads/") and (self.enterprise or request.origin == "api"):
            path = path[len("/api/uploads") :]
        elif request.origin != "uploads" or self.enterprise:
            return
        match = _UPLOAD.match(path)
        raw_name = request.param("name")
        if match is None or not raw_name:
            return
        try:
            viewer = self._viewer(request)
            repo = self.state.repo(
                unquote(match.group("owner")), unquote(match.group("repo")), viewer, DOCS
            )
            release, name = self.state.check_upload(
                repo, int(match.group("release_id")), viewer, raw_name, ""
            )
        except ApiError:
            return
        assert viewer is not None
        self.state.store_asset(
            release,
            uploader=viewer,
            name=name,
            label=None,
            content_type=request.header("content-type") or "",
            data=b"",
            state=state,
        )

    # -- downloads: github.com and the storage origin ----------------------------------

    def signed_url(self, asset: Asset) -> str:
        """A storage URL for ``asset`` valid for ``signed_url_ttl`` seconds."""
        expires = int(time.time()) + self._signed_url_ttl
        query = urlencode(
            [
                ("response-content-disposition", f"attachment; filename={asset.name}"),
                ("response-content-type", "application/octet-stream"),
                ("exp", str(expires)),
                ("sig", self._signature(asset.id, asset.name, expires)),
            ]
        )
        return f"{self.storage_url}/objects/{asset.id}/{quote(asset.name, safe='+@')}?{query}"

    def _signature(self, asset_id: int, name: str, expires: int) -> str:
        message = f"{asset_id}\n{name}\n{expires}".encode()
        return hmac.new(self._signing_key, message, hashlib.sha256).hexdigest()

    def _web(self, request: _Request) -> _Answer | None:
        """github.com's download routes; None when the path is not one of them."""
        latest = _LATEST_DOWNLOAD.match(request.path)
        match = latest or _DOWNLOAD.match(request.path)
        if match is None or request.method not in ("GET", "HEAD"):
            return None
        missing = _Answer(
            status=404, body=b"Not Found", headers={"Content-Type": "text/plain; charset=utf-8"}
        )
        try:
            viewer = self._viewer(request)
            repo = self.state.repo(
                unquote(match.group("owner")), unquote(match.group("repo")), viewer, DOCS
            )
            if latest is not None:
                release = self.state.latest_release(repo, DOCS)
            else:
                release = self.state.release_by_url_tag(repo, unquote(match.group("tag")), viewer)
        except ApiError:
            return missing
        name = unquote(match.group("name"))
        for asset in self.state.assets(release.id):
            if asset.name == name and asset.state == "uploaded":
                if request.method == "GET":
                    self.state.count_download(asset.id)
                return _Answer(status=302, headers={"Location": self.signed_url(asset)})
        return missing

    def _storage(self, request: _Request) -> _Answer:
        xml = {"Content-Type": "application/xml"}
        if request.header("authorization") is not None:
            return _Answer(
                status=400,
                headers=xml,
                body=(
                    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>InvalidAuthenticationInfo'
                    b"</Code><Message>Authentication information is not given in the correct "
                    b"format. Only one auth mechanism allowed; the signature query parameters or "
                    b"the Authorization header, not both.</Message></Error>"
                ),
            )
        match = _OBJECT.match(request.path)
        if match is None or request.method not in ("GET", "HEAD"):
            return _Answer(
                status=404,
                headers=xml,
                body=(
                    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ResourceNotFound</Code>'
                    b"<Message>The specified resource does not exist.</Message></Error>"
                ),
            )
        asset_id = int(match.group("asset_id"))
        name = unquote(match.group("name"))
        try:
            expires = int(request.param("exp") or "")
        except ValueError:
            expires = 0
        expected = self._signature(asset_id, name, expires)
        if not hmac.compare_digest(expected, request.param("sig") or "") or (expires < time.time()):
            return _Answer(
                status=403,
                headers=xml,
                body=(
                    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed'
                    b"</Code><Message>Server failed to authenticate the request. Make sure the "
                    b"signature is valid and has not expired.</Message></Error>"
                ),
            )
        asset = self.state.stored_asset(asset_id)
        if asset is None or asset.name != name:
            return _Answer(
                status=404,
                headers=xml,
                body=(
                    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code>'
                    b"<Message>The specified blob does not exist.</Message></Error>"
                ),
            )
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f"attachment; filename={asset.name}",
            "ETag": '"' + hashlib.md5(asset.data, usedforsecurity=False).hexdigest() + '"',
            "Last-Modified": asset.updated_at.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "Accept-Ranges": "bytes",
        }
        size = len(asset.data)
        ranged = _RANGE.fullmatch(request.header("range") or "")
        if self.ranges and ranged is not None and int(ranged["first"]) < size:  # as Azure's
            first = int(ranged["first"])
            last = min(int(ranged["last"] or size - 1), size - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
            return _Answer(status=206, body=asset.data[first : last + 1], headers=headers)
        return _Answer(status=200, body=asset.data, headers=headers)
