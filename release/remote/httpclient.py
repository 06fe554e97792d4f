"""The one HTTP edge: the httpx client every stage uses, credentials scoped to the origins
they belong to, and downloads that are hashed as they stream, with bounded retries.

`OriginAuth` sends a bearer token (GitHub's) only to the origins it names, and an index's
basic credentials only to that index, and only once it asks (401). Redirects are httpx's
own, which drops `Authorization` when a redirect leaves the origin (a release asset's
download goes to a storage host that must never see the token).

`StreamedAnswers` are the event hooks of a client that holds whole answers (githubkit's):
each answer is read as it streams in, unencoded, no further than a limit and no later than
a deadline.

`fetch` retries what is worth retrying (connection failures, 5xx, 429, and the statuses
a caller names, such as 404 while a new file propagates) under one `RetryPolicy` and one
deadline, which is a total: each attempt's connect and read timeouts are cut to the time
left, and a body still streaming at the deadline is given up on. A host name that does not
resolve is not retried, since no wait will fix it.

A timeout bounds one read, so a server that trickles its status line and headers a byte
within each would hold a request forever: the clients made here read and write through
`DeadlineBackend` (release.remote.socket_deadline), whose every socket operation is cut to
the time the deadline `retry.bounded_by` set for the thread leaves.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import socket
import ssl
import time
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from release import __version__
from release.credentials import Secret, index_credentials, is_pypi_token, is_pypi_url, mask
from release.remote import retry
from release.remote.socket_deadline import DeadlineBackend

USER_AGENT = f"cuda-wheel-release/{__version__}"
Client = httpx.Client  # the type stages take; only this module makes one
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# A body held in memory (a page, a metadata file) is cut off past this many bytes, as
# decoded: a page that inflates to gigabytes (Content-Encoding: gzip) or never ends is
# refused, never held.
KEPT_BODY_LIMIT = 64 * 2**20


def origin_of(url: str | httpx.URL) -> str:
    """`scheme://host[:port]` of a URL, lower-cased."""
    parsed = httpx.URL(str(url))
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}".lower()


def origin_or_none(url: str) -> str | None:
    """`origin_of(url)`, or None for a value no request could go to."""
    try:
        return origin_of(url)
    except httpx.InvalidURL:
        return None


@dataclass(frozen=True)
class BasicCredentials:
    username: str
    password: Secret


def index_logins(
    environ: Mapping[str, str], indexes: Iterable[tuple[str, Iterable[str | None]]]
) -> dict[str, BasicCredentials]:
    """The basic credentials the environment gives each index (twine's variables, for its
    upload URL: the first of each pair), by the origins it serves (the second; None is
    skipped); an index without a password gets none."""
    basic: dict[str, BasicCredentials] = {}
    for upload_url, urls in indexes:
        creds = index_credentials(environ, upload_url)
        if creds is None or creds.password is None:
            continue
        pypi_only = is_pypi_token(creds.password)  # good at PyPI alone: shown to none else
        for url in urls:
            if url and (is_pypi_url(url) or not pypi_only):
                basic[origin_of(url)] = BasicCredentials(creds.username, creds.password)
    return basic


class OriginAuth(httpx.Auth):
    """Credentials by origin (see the module doc)."""

    def __init__(
        self,
        *,
        bearer: Mapping[str, Secret] | None = None,
        basic: Mapping[str, BasicCredentials] | None = None,
    ) -> None:
        self.bearer = {origin.lower(): token for origin, token in (bearer or {}).items()}
        self.basic = {origin.lower(): creds for origin, creds in (basic or {}).items()}

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        origin = origin_of(request.url)
        token = self.bearer.get(origin)
        if token:
            request.headers["Authorization"] = f"Bearer {token.reveal()}"
        response = yield request
        creds = self.basic.get(origin)
        if (
            response.status_code == 401
            and creds is not None
            and "Authorization" not in request.headers
        ):
            basic = httpx.BasicAuth(creds.username, creds.password.reveal())
            yield next(basic.auth_flow(request))

    @property
    def secrets(self) -> tuple[str, ...]:
        values = [t.reveal() for t in self.bearer.values()]
        values += [c.password.reveal() for c in self.basic.values()]
        return tuple(v for v in values if v)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every client of a process (certifi's CA bundle, or SSL_CERT_FILE's
    and SSL_CERT_DIR's): loading them costs some 25 ms a client otherwise."""
    return httpx.create_ssl_context()


def client(
    *,
    auth: httpx.Auth | None = None,
    concurrency: int = 16,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
) -> httpx.Client:
    """The HTTP client of a command: redirects followed, bounded connections, each socket
    operation within the deadline `retry.bounded_by` set."""
    return within_deadlines(
        httpx.Client(
            auth=auth,
            verify=tls_context(),
            timeout=timeout,
            follow_redirects=True,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            headers={"User-Agent": USER_AGENT},
        )
    )


def within_deadlines(http: httpx.Client) -> httpx.Client:
    """`http`, its connection pools (its own and each proxy's) reading through
    `DeadlineBackend`. httpx offers no public way to hand its pools a network backend
    (a `transport` of one's own would lose the proxies the environment names), so this
    reaches the private attributes httpx 0.28 and httpcore 1.0 hold them in: a release that
    renames them fails here, at a client's making, never silently."""
    transports = [http._transport, *http._mounts.values()]
    for transport in transports:
        if transport is None:  # a host the environment's NO_PROXY names: the default's
            continue
        pool = transport._pool  # type: ignore[attr-defined]
        backend = pool._network_backend
        if not isinstance(backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(backend)
    return http


def unresolvable(error: BaseException) -> bool:
    """Whether a connection failed because the host name does not resolve."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return True
        text = str(current)
        if "Name or service not known" in text or "nodename nor servname" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


class AnswerRefused(Exception):
    """An answer refused as it streams in (too large, encoded as it was not asked): never
    worth another try. Its message says why, its `hint` what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class _Bounded(httpx.SyncByteStream):
    """A body as it streams in, read no further than `limit` (bytes, the refusal past them)
    and no later than `deadline`."""

    def __init__(
        self,
        stream: httpx.SyncByteStream,
        *,
        limit: tuple[int, AnswerRefused],
        deadline: retry.Deadline,
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        size, (limit, too_large) = 0, self._limit
        for chunk in self._stream:
            size += len(chunk)
            if size > limit:
                raise AnswerRefused(str(too_large), too_large.hint)
            if self._deadline.remaining() <= 0:
                raise httpx.ReadTimeout(f"the {self._deadline.total:.0f} s deadline passed")
            yield chunk

    def close(self) -> None:
        self._stream.close()


@dataclass(kw_only=True)
class StreamedAnswers:
    """The event hooks of a client that holds whole answers before anyone looks at them
    (githubkit's), so that an answer is cut off as it streams in or never. Each request asks
    its answer unencoded (a body's size is then its size on the wire: no gzip of gigabytes)
    and has every timeout cut to the time `deadline()` leaves (a server that stalls ends at
    the deadline); each answer, redirects included, is refused if encoded anyway, and its
    body read no further than `most` bytes (what the JSON reader takes; a 200 `reading` a
    given size: that size) and no later than the deadline (a server that trickles ends there
    too). `who` answered; `hint` says what to do about an answer refused. Without a deadline,
    nothing is cut."""

    deadline: Callable[[], retry.Deadline | None]
    who: str
    hint: str
    most: int = KEPT_BODY_LIMIT
    _exactly: tuple[int, AnswerRefused] | None = None

    def hooks(self, *before: Callable[[httpx.Request], None]) -> dict[str, list[Any]]:
        """httpx's `event_hooks`, after the request hooks `before`."""
        return {"request": [*before, self.on_request], "response": [self.on_response]}

    @contextlib.contextmanager
    def reading(self, size: int, refusal: AnswerRefused) -> Iterator[None]:
        """A 200 answer inside the block is read no further than `size` (an asset's
        download: the size listed for it), past which `refusal` is raised."""
        self._exactly = (size, refusal)
        try:
            yield
        finally:
            self._exactly = None

    @contextlib.contextmanager
    def sockets_of(self, http: httpx.Client) -> Iterator[None]:
        """Inside the block, `http` connects, reads and writes no later than the deadline:
        a server that trickles its status line and headers ends there too."""
        within_deadlines(http)
        with retry.bounded_by(self.deadline()):
            yield

    def on_request(self, request: httpx.Request) -> None:
        request.headers["Accept-Encoding"] = "identity"
        deadline = self.deadline()
        if deadline is not None:
            left = max(deadline.remaining(), 0.001)
            timeouts = request.extensions.get("timeout", {})
            request.extensions["timeout"] = {
                phase: _cap(value, left) for phase, value in timeouts.items()
            }

    def on_response(self, response: httpx.Response) -> None:
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise AnswerRefused(
                f"{self.who} answered in the encoding {encoding[:40]!r}, which was not asked for",
                self.hint,
            )
        deadline = self.deadline()
        if deadline is None:
            return
        limit = self._exactly if self._exactly and response.status_code == 200 else None
        too_large = f"{self.who}'s answer is larger than {self.most // 2**20} MiB"
        response.stream = _Bounded(
            response.stream,  # type: ignore[arg-type]  # httpx's own sync stream
            limit=limit or (self.most, AnswerRefused(too_large, self.hint)),
            deadline=deadline,
        )


@dataclass(frozen=True, kw_only=True)
class Download:
    """What one GET gave: the final status and URL, and the body's size and sha256."""

    status: int | None
    size: int = 0
    sha256: str = ""
    url: str = ""  # the last URL of the redirect chain
    content_type: str = ""
    body: bytes | None = None  # only when asked to keep it
    error: str | None = None  # a connection failure, masked
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200


class _Retry(Exception):
    def __init__(self, verdict: retry.TryAgain, download: Download) -> None:
        super().__init__(verdict.reason)
        self.verdict = verdict
        self.download = download


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        value = headers.get("retry-after")
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


class _TooLarge(Exception):
    """A body past its limit: not worth trying again."""


def _not_asked(error: Exception, secrets: tuple[str, ...]) -> str:
    """Why a GET failed without an answer worth trying again."""
    if isinstance(error, _TooLarge):
        return str(error)
    return mask(f"not a URL that can be asked: {error}", secrets)


def _unread(response: httpx.Response, *, identity: bool, ranged: bool) -> Download | None:
    """What an answer is without its body: one in an encoding `identity` refuses (asked for
    the bytes as stored), or a 200 to a range request (ranges ignored: its headers say what
    it would send); None where its body is to be read."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if identity and encoding != "identity":
        refused = f"answered in the encoding {encoding[:40]!r}, which was not asked for"
        return Download(status=response.status_code, url=str(response.url), error=refused)
    if ranged and response.status_code == 200:
        return Download(status=200, url=str(response.url), headers=dict(response.headers))
    return None


def fetch(
    http: httpx.Client,
    url: str,
    *,
    keep: bool = False,
    into: Path | None = None,
    accept: str | None = None,
    retry_statuses: Collection[int] = (),
    policy: retry.RetryPolicy | None = None,
    deadline: retry.Deadline | None = None,
    sleep: retry.Sleep = time.sleep,
    clock: retry.Clock = time.monotonic,
    secrets: Iterable[str] = (),
    byte_range: tuple[int, int] | None = None,
    max_bytes: int | None = None,
    identity: bool = False,
) -> Download:
    """GET `url` (redirects followed), hashing the body as it streams; retried per the module
    doc, but a body past `max_bytes` (KEPT_BODY_LIMIT if held), a URL httpx cannot send and a
    file `into` that cannot be written fail at once. `keep` holds the body; `into` writes it
    there (each attempt from the start). `byte_range` (first, last) asks for those bytes: a
    200 (ranges ignored) comes back with its headers alone. `identity` asks for the bytes as
    stored, as pip does for a file, and refuses another one unread. Never raises for an answer."""
    policy = policy or retry.RetryPolicy(attempts=5, initial_delay=1.0, total=300.0)
    deadline = deadline or retry.Deadline(policy.total, clock)
    hidden = tuple(secrets)
    headers = {"Accept": accept} if accept else {}
    headers |= {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"} if byte_range else {}
    headers |= {"Accept-Encoding": "identity"} if identity else {}
    retried = TRANSIENT_STATUSES | frozenset(retry_statuses)
    limit = max_bytes if max_bytes is not None else (KEPT_BODY_LIMIT if keep else None)

    def attempt(_: int) -> Download:
        left = deadline.remaining()
        if left <= 0:
            raise _Retry(retry.TryAgain(reason="no time left"), Download(
                status=None, url=url, error="no time left"))  # fmt: skip
        try:
            with (
                retry.bounded_by(deadline),
                http.stream("GET", url, headers=headers, timeout=_capped(http, left)) as response,
                into.open("wb") if into is not None else contextlib.nullcontext() as sink,
            ):
                got = _unread(response, identity=identity, ranged=byte_range is not None)
                got = got or _streamed(
                    response, deadline, policy.total, keep=keep, sink=sink, limit=limit
                )
        except (_TooLarge, httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as error:
            return Download(status=None, url=url, error=_not_asked(error, hidden))
        except httpx.HTTPError as error:
            failed = Download(
                status=None, url=url, error=mask(f"{type(error).__name__}: {error}", hidden)
            )
            if unresolvable(error):
                return failed
            raise _Retry(
                retry.TryAgain(reason=failed.error or "connection failed"), failed
            ) from None
        except OSError as error:  # the file `into` names: a full disk, a directory gone
            return _unwritten(url, into, error, hidden)
        if got.status in retried:
            reason = f"HTTP {got.status}"
            raise _Retry(retry.TryAgain(reason=reason, after=_retry_after(got.headers)), got)
        return got

    last: list[Download] = []

    def classify(error: Exception) -> retry.TryAgain | None:
        if isinstance(error, _Retry):
            last[:] = [error.download]
            return error.verdict
        return None

    try:
        return retry.call_with_retries(
            attempt, classify=classify, policy=policy, deadline=deadline, sleep=sleep, what=url
        )
    except retry.RetryExhausted:
        return last[0] if last else Download(status=None, url=url, error="no time left")


def _unwritten(url: str, into: Path | None, error: OSError, hidden: Sequence[str]) -> Download:
    where = f" into {into}" if into is not None else ""
    why = f"cannot write the download{where}: {error.strerror or error}"
    return Download(status=None, url=url, error=mask(why, hidden))


def _streamed(
    response: httpx.Response,
    deadline: retry.Deadline,
    total: float,
    *,
    keep: bool,
    sink: BinaryIO | None,
    limit: int | None = None,
) -> Download:
    """The body of `response` hashed as it streams, held (`keep`) or written to `sink`;
    _TooLarge past `limit` bytes as decoded."""
    digest = hashlib.sha256()
    size = 0
    chunks = []
    for chunk in response.iter_bytes():
        if deadline.remaining() <= 0:
            raise httpx.ReadTimeout(f"the {total:.0f} s deadline passed")
        digest.update(chunk)
        size += len(chunk)
        if limit is not None and size > limit:
            raise _TooLarge(f"the body is larger than {limit // 2**20} MiB as decoded")
        if keep:
            chunks.append(chunk)
        if sink is not None:
            sink.write(chunk)
    return Download(
        status=response.status_code,
        size=size,
        sha256=digest.hexdigest(),
        url=str(response.url),
        content_type=response.headers.get("content-type", ""),
        body=b"".join(chunks) if keep else None,
        headers=dict(response.headers),
    )


def _capped(http: httpx.Client, left: float) -> httpx.Timeout:
    """The client's timeouts, none longer than the `left` seconds of the call's deadline:
    a call with retries ends within its policy's total (connect + read, and the waits)."""
    configured = http.timeout
    return httpx.Timeout(
        connect=_cap(configured.connect, left),
        read=_cap(configured.read, left),
        write=_cap(configured.write, left),
        pool=_cap(configured.pool, left),
    )


def _cap(value: float | None, left: float) -> float:
    """A timeout (None: none) no longer than the `left` seconds of a deadline."""
    return left if value is None else min(value, left)


def _connect_and_read(timeouts: httpx.Timeout) -> float:
    """The longest a request can wait on the network by `timeouts` (0: none bound it)."""
    return sum(t for t in (timeouts.connect, timeouts.read) if t is not None)


def first_byte(http: httpx.Client, url: str, *, secrets: Iterable[str] = ()) -> Download:
    """GET `url`'s first byte (Range: bytes=0-0), once: its status (206, or 200 from a
    server that ignores ranges) and headers, the object's size in Content-Range. What a
    HEAD tells, from stores that let anyone GET but not HEAD. Within the client's connect
    and read timeouts added up, however the answer trickles in. Never raises for the
    server's sake."""
    total = _connect_and_read(http.timeout) or _connect_and_read(DEFAULT_TIMEOUT)
    try:
        with (
            retry.bounded_by(retry.Deadline(total, time.monotonic)),
            http.stream("GET", url, headers={"Range": "bytes=0-0"}) as response,
        ):
            return Download(
                status=response.status_code, url=str(response.url), headers=dict(response.headers)
            )
    except httpx.HTTPError as error:
        return Download(
            status=None, url=url, error=mask(f"{type(error).__name__}: {error}", secrets)
        )
