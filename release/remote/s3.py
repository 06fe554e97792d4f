"""The one S3 edge: AWS S3, Cloudflare R2 and MinIO through boto3, the maintained client.

Only what the nightly channel needs, each one request: GET, HEAD, PUT (optionally
conditional: `If-None-Match: *` creates only, `If-Match: ETAG` replaces only that
version: the compare-and-swap all three stores support), a server-side copy, and one
batched delete. A condition that does not hold is a `Precondition`, never a generic
failure; a missing object is None. Every other failure is a PublishError in one line,
with the bucket and key and no credential. Credentials are passed in (the command reads
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment, nowhere else): the client
reads no profile, no instance metadata and no other source of keys.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
import botocore
import botocore.awsrequest
import botocore.config
import botocore.exceptions
import botocore.loaders
import botocore.parsers
import botocore.response
import botocore.session

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import (
        DeleteObjectsOutputTypeDef,
        ListObjectsV2OutputTypeDef,
        ObjectIdentifierTypeDef,
        PutObjectRequestTypeDef,
    )

from release.credentials import S3Credentials, mask
from release.errors import PublishError, one_line, shown
from release.remote import retry

DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """How long one S3 call may take: each attempt `connect` s to connect and `read` s for
    each wait on the socket, `attempts` attempts with `first_wait` s doubling in between.
    `total` is the bound a call ends within (docs/nightly.md states it): an endpoint that
    accepts and never answers is given up on after attempts x read + the waits."""

    connect: float = 10.0
    read: float = 30.0
    attempts: int = 3
    first_wait: float = 1.0

    @property
    def policy(self) -> retry.RetryPolicy:
        return retry.RetryPolicy(
            attempts=self.attempts,
            initial_delay=self.first_wait,
            factor=2.0,
            total=self.total,
            request_timeout=self.connect + self.read,
        )

    @property
    def waits(self) -> float:
        return float(sum(self.first_wait * 2**n for n in range(self.attempts - 1)))

    @property
    def total(self) -> float:
        return self.attempts * (self.connect + self.read) + self.waits


LIMITS = Limits()


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """Where the objects are: a bucket, at `endpoint` (None: AWS) in `region`."""

    name: str
    endpoint: str | None
    region: str

    def describe(self) -> str:
        return f"s3://{self.name}" + (f" at {self.endpoint}" if self.endpoint else "")


@dataclass(frozen=True, kw_only=True)
class Stored:
    """An object as one GET or HEAD found it (`data` empty for a HEAD)."""

    etag: str  # without quotes
    size: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    data: bytes = b""


# The objects a command reads whole (a channel's state, a /nightly/ page, a keep-list) are
# read no further: one a bucket's other writer made huge costs no memory past it.
MAX_OBJECT_READ = 64 * 2**20
# Every other answer's body (a listing, a write's or a deletion's answer, an error document)
# is read no further: the longest S3 gives, a page of 1,000 keys of 1,024 bytes, is under
# 2 MiB, and botocore would hold a longer one whole (several times over as it parses it).
MAX_ANSWER = 16 * 2**20
CHUNK = 64 * 2**10


class UnreadableAnswer(botocore.exceptions.BotoCoreError):
    """An answer botocore could not parse, as one of its own errors."""

    fmt = "the answer does not parse: {reason}"


class Precondition(Exception):
    """A conditional write whose condition did not hold (412, or If-Match on a key that is
    not there): another writer got there first."""


def etag_of(value: object) -> str:
    return str(value or "").strip('"')


_LOADER_LOCK = threading.Lock()


@functools.cache
def _model_loader() -> botocore.loaders.Loader:
    """botocore's reader of its service models, one a process: a session of its own reads
    and parses them again for each client (some 150 ms of JSON)."""
    loader: botocore.loaders.Loader = botocore.session.Session().get_component("data_loader")
    return loader


def _session() -> boto3.session.Session:
    """A session of its own (no state shared between stores) on the process's model reader."""
    core = botocore.session.Session()
    with _LOADER_LOCK:
        loader = _model_loader()
        core.register_component("data_loader", loader)
        session = boto3.session.Session(botocore_session=core)
        # each boto3 session adds its own data folder to the reader's search path once more
        loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


class S3Store:
    """The objects of one bucket, through one boto3 client."""

    def __init__(
        self,
        bucket: Bucket,
        keys: S3Credentials | None,
        *,
        limits: Limits = LIMITS,
        sleep: retry.Sleep = time.sleep,
    ) -> None:
        self.bucket = bucket
        self.limits = limits
        self._sleep = sleep
        self._secrets = keys.values() if keys else ()
        config = botocore.config.Config(
            region_name=bucket.region if bucket.region != "auto" or bucket.endpoint else None,
            # R2 and MinIO take path-style addressing everywhere; AWS takes both
            s3={"addressing_style": "path" if bucket.endpoint else "auto"},
            # one attempt each: `_call` retries under the call's total deadline (Limits)
            retries={"mode": "standard", "total_max_attempts": 1},
            connect_timeout=limits.connect,
            read_timeout=limits.read,
            # checksums only where the API requires them: R2 and older MinIO reject the
            # trailing checksums newer clients send by default
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            signature_version=None if keys else botocore.UNSIGNED,
            user_agent_extra="cuda-wheel-release",
        )
        token = keys.session_token if keys else None
        try:
            self._client: S3Client = _session().client(
                "s3",
                endpoint_url=bucket.endpoint,
                aws_access_key_id=keys.access_key.reveal() if keys else None,
                aws_secret_access_key=keys.secret_key.reveal() if keys else None,
                aws_session_token=token.reveal() if token else None,
                config=config,
            )
        except (ValueError, botocore.exceptions.BotoCoreError) as error:
            # an endpoint that is no URL (`http://[::1`), a region botocore takes for none
            why = one_line(f"{type(error).__name__}: {error}")
            raise PublishError(
                mask(f"{bucket.describe()}: no S3 client can be made for it: {why}", self._secrets),
                hint="check the destination's endpoint and region",
            ) from None
        # botocore reads an answer whole before it looks at it: each request is sent here
        # through the client's own session instead, and its answer read to MAX_ANSWER
        self._http = self._client._endpoint.http_session  # type: ignore[attr-defined]
        # a before-send handler's answer is used in place of sending (the stubs say None)
        self._client.meta.events.register("before-send.s3", self._send)  # type: ignore[arg-type]

    def _send(
        self, request: botocore.awsrequest.AWSPreparedRequest, **_: object
    ) -> botocore.awsrequest.AWSResponse:
        """`request` sent as botocore sends it, its answer's body left unread where it is an
        object's (`get` reads that, to its bound) and read here to MAX_ANSWER otherwise."""
        wanted = request.stream_output
        request.stream_output = True  # the session then leaves the body unread
        try:
            answer: botocore.awsrequest.AWSResponse = self._http.send(request)
        finally:
            request.stream_output = wanted
        deadline = retry.current()
        if deadline is not None:  # a body that trickles in ends at the call's bound too
            answer = botocore.awsrequest.AWSResponse(
                answer.url,
                answer.status_code,
                answer.headers,  # type: ignore[arg-type]
                _Timed(answer.raw, deadline),
            )
        if wanted and answer.status_code < 300:
            return answer
        data = _answer_body(answer)
        return botocore.awsrequest.AWSResponse(
            answer.url,
            answer.status_code,
            answer.headers,  # type: ignore[arg-type]
            _Read(data),
        )

    # --- reads ---

    def get(self, key: str, *, most: int = MAX_OBJECT_READ) -> Stored | None:
        """The object `key`, its body read to `most` bytes and one more (so that a caller's
        own bound sees an object past it without holding all of it); None where there is
        none."""
        try:
            answer, data = self._call(
                "GET", key,
                lambda: _read_body(
                    self._client.get_object(Bucket=self.bucket.name, Key=key), most + 1
                ),
            )  # fmt: skip
        except botocore.exceptions.ClientError as error:
            if _status(error) == 404 and _code(error) != "NoSuchBucket":
                return None
            raise self._failure("GET", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("GET", key, error) from None
        return Stored(
            etag=self._etag("GET", key, answer.get("ETag")),
            size=len(data),
            metadata=dict(answer.get("Metadata") or {}),
            data=data,
        )

    def head(self, key: str) -> Stored | None:
        try:
            answer = self._call(
                "HEAD", key, lambda: self._client.head_object(Bucket=self.bucket.name, Key=key)
            )
        except botocore.exceptions.ClientError as error:
            if _status(error) == 404:
                return None
            raise self._failure("HEAD", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("HEAD", key, error) from None
        return Stored(
            etag=self._etag("HEAD", key, answer.get("ETag")),
            size=int(answer.get("ContentLength") or 0),
            metadata=dict(answer.get("Metadata") or {}),
        )

    # --- writes ---

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str,
        cache_control: str,
        metadata: Mapping[str, str] | None = None,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Write `key`; its new ETag. `create_only`: only where no object is (If-None-Match:
        *); `if_match`: only over the object with that ETag. Precondition otherwise."""
        request: PutObjectRequestTypeDef = {
            "Bucket": self.bucket.name,
            "Key": key,
            "Body": data,
            "ContentType": content_type,
            "CacheControl": cache_control,
            "Metadata": dict(metadata or {}),
        }
        if create_only:
            request["IfNoneMatch"] = "*"
        if if_match is not None:
            request["IfMatch"] = f'"{if_match}"'
        conditional = create_only or if_match is not None
        try:
            answer = self._call("PUT", key, lambda: self._client.put_object(**request))
        except botocore.exceptions.ClientError as error:
            status = _status(error)
            # 409 ConditionalRequestConflict: a concurrent conditional write to this key
            if conditional and (status in (409, 412) or (status == 404 and if_match)):
                raise Precondition(key) from None
            raise self._failure("PUT", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("PUT", key, error) from None
        return self._etag("PUT", key, answer.get("ETag"))

    def _etag(self, verb: str, key: str, said: object) -> str:
        """The ETag an answer gives; S3, R2 and MinIO give one to every GET, HEAD and PUT, and
        the compare-and-swap writes name it: an answer without one is not theirs (a portal's
        page, a cache that drops it)."""
        etag = etag_of(said)
        if not etag:
            raise self._failure(verb, key, UnreadableAnswer(reason="no ETag: not an S3 answer"))
        return etag

    def copy(self, source: str, target: str) -> bool:
        """A server-side copy of `source` to `target` (metadata kept); False where `source`
        is not there."""
        try:
            self._call(
                "COPY", source,
                lambda: self._client.copy_object(
                    Bucket=self.bucket.name, Key=target,
                    CopySource={"Bucket": self.bucket.name, "Key": source},
                ),
            )  # fmt: skip
        except botocore.exceptions.ClientError as error:
            if _status(error) == 404:
                return False
            raise self._failure("COPY", source, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("COPY", source, error) from None
        return True

    def delete(self, keys: Sequence[str]) -> None:
        """Delete `keys` (a key that is not there counts as deleted), DELETE_BATCH a request."""
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            try:
                answer = self._call("DELETE", batch[0], self._deleting(batch))
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
                raise self._failure("DELETE", batch[0], error) from None
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                key, code = str(first.get("Key", "")), str(first.get("Code", ""))
                # both are the server's text: each said on this line, no credential in it
                said = code if _S3_CODE.fullmatch(code) else shown(code)
                raise PublishError(
                    mask(
                        f"{self.bucket.describe()}: {len(errors)} of {len(batch)} deletions "
                        f"failed; first {one_line(key)}: {said}",
                        self._secrets,
                    ),
                    hint="run the same command again: the deletion is repeated",
                )

    def list(self, prefix: str) -> dict[str, str]:
        """Every object under `prefix`: its key and ETag (ListObjectsV2, page by page; a
        continuation token given twice ends it in a PublishError, not a loop)."""
        found: dict[str, str] = {}
        token: str | None = None
        tokens: set[str] = set()
        while True:
            try:
                answer = self._call("LIST", prefix, self._listing(prefix, token))
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
                raise self._failure("LIST", prefix, error) from None
            if "IsTruncated" not in answer:  # every page of S3, R2 and MinIO says it
                # well-formed XML of something else (a portal's page) parses as no objects
                why = "not a ListObjectsV2 answer (no IsTruncated)"
                raise self._failure("LIST", prefix, UnreadableAnswer(reason=why))
            for item in answer.get("Contents") or []:
                found[str(item.get("Key"))] = etag_of(item.get("ETag"))
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                return found
            if token in tokens:
                raise PublishError(
                    f"{self.bucket.describe()}: LIST {prefix} does not end: the server gives "
                    "a continuation token it gave before",
                    hint="the S3 server's listing is broken; check the endpoint",
                )
            tokens.add(token)

    def _deleting(self, batch: Sequence[str]) -> Callable[[], DeleteObjectsOutputTypeDef]:
        objects: list[ObjectIdentifierTypeDef] = [{"Key": k} for k in batch]
        return lambda: self._client.delete_objects(
            Bucket=self.bucket.name, Delete={"Objects": objects, "Quiet": True}
        )

    def _listing(self, prefix: str, token: str | None) -> Callable[[], ListObjectsV2OutputTypeDef]:
        if token:
            return lambda: self._client.list_objects_v2(
                Bucket=self.bucket.name, Prefix=prefix, ContinuationToken=token
            )
        return lambda: self._client.list_objects_v2(Bucket=self.bucket.name, Prefix=prefix)

    def _call(self, verb: str, key: str, operation: Callable[[], T]) -> T:
        """`operation` (one request), retried on 5xx, 429, a timeout or a dropped connection,
        within the Limits' total; a PublishError once they are spent."""

        def classify(error: Exception) -> retry.TryAgain | None:
            if isinstance(error, botocore.exceptions.ClientError):
                status = _status(error)
                if status >= 500 or status == 429:
                    return retry.TryAgain(reason=_said(error))
                return None
            transient = (
                botocore.exceptions.ConnectionError,
                botocore.exceptions.HTTPClientError,
                botocore.exceptions.IncompleteReadError,  # a body cut short
            )
            if isinstance(error, transient):
                return retry.TryAgain(reason=one_line(f"{type(error).__name__}: {error}"))
            return None

        def once() -> T:
            try:
                return operation()
            except (ValueError, botocore.parsers.ResponseParserError) as error:
                # botocore's parser on an answer it cannot read (a `Last-Modified: yesterday`,
                # XML that is no S3 answer): the server's fault, said as the others are, on
                # one line (the parser quotes the server's text)
                raise UnreadableAnswer(reason=one_line(str(error)[:200])) from None

        policy = self.limits.policy
        deadline = retry.Deadline(policy.total, time.monotonic)
        try:
            with retry.bounded_by(deadline):  # each body's read too (`_send`)
                return retry.call_with_retries(
                    lambda _: once(), classify=classify, policy=policy, deadline=deadline,
                    sleep=self._sleep, what=f"{verb} {key}",
                )  # fmt: skip
        except retry.RetryExhausted as spent:
            message = mask(
                f"{self.bucket.describe()}: {verb} {key} failed: {spent.last} "
                f"({spent.attempts} attempts in {spent.elapsed:.0f} s; a call has at most "
                f"{self.limits.total:.0f} s)",
                self._secrets,
            )
            raise PublishError(
                message,
                hint="check the destination's endpoint and that it answers, then run the "
                "command again",
            ) from None

    def _failure(self, verb: str, key: str, error: Exception) -> PublishError:
        if isinstance(error, botocore.exceptions.ClientError):
            why = _said(error)
        else:
            why = one_line(f"{type(error).__name__}: {error}")
        message = mask(f"{self.bucket.describe()}: {verb} {key} failed: {why}", self._secrets)
        region = _region_named(error)
        if region is not None:
            hint = (
                f"the bucket answers from region {region}: set `region: {region}` on the "
                "destination in matrix.yaml"
            )
        elif why.startswith("HTTP 301"):
            hint = (
                "the server redirects to another endpoint or region: check the "
                "destination's endpoint and region"
            )
        elif "AccessDenied" in why or "Forbidden" in why or "403" in why:
            hint = "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket's permissions"
        else:
            hint = "check the destination's endpoint and bucket, then run the command again"
        return PublishError(message, hint=hint)


def _read_body(answer: T, most: int) -> tuple[T, bytes]:
    """The GetObject answer and its body (`most` bytes at the most), read in the same attempt
    (a body cut short is retried with the request). A body that ends before its
    Content-Length (the server closed the connection in order) is cut short too: botocore
    checks the length only of a body read to its end, never of one read up to a bound."""
    body = answer["Body"]  # type: ignore[index]
    data: bytes = body.read(most)
    body.close()
    expected = answer.get("ContentLength")  # type: ignore[attr-defined]
    if isinstance(expected, int) and len(data) < min(expected, most):
        raise botocore.exceptions.IncompleteReadError(
            actual_bytes=len(data), expected_bytes=expected
        )
    return answer, data


class DeadlinePassed(botocore.exceptions.HTTPClientError):
    """A body still coming in when its call's time was up."""

    fmt = "the {total:.0f} s deadline of the call passed while its answer came in"


class _Timed:
    """An answer's body as it comes in (urllib3's), read no later than `deadline`: each read
    takes what has arrived (`read1`), so that a body that trickles in, a byte within each
    socket timeout, still ends at the call's bound. What botocore's StreamingBody reads."""

    def __init__(self, raw: Any, deadline: retry.Deadline) -> None:
        self._raw = raw
        self._deadline = deadline

    def read(self, amt: int | None = None) -> bytes:
        parts: list[bytes] = []
        got = 0
        while amt is None or got < amt:
            if self._deadline.remaining() <= 0:
                self._raw.close()  # its connection, which no one will read to its end
                raise DeadlinePassed(total=self._deadline.total)
            part: bytes = self._raw.read1(CHUNK if amt is None else min(CHUNK, amt - got))
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def __getattr__(self, name: str) -> Any:  # close, readable, stream, ...: urllib3's
        return getattr(self._raw, name)


class _Read:
    """An answer's body as read, where botocore's AWSResponse reads it from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: object) -> Iterator[bytes]:
        yield self._data


def _answer_body(answer: botocore.awsrequest.AWSResponse) -> bytes:
    """An answer's body, read to MAX_ANSWER; UnreadableAnswer past it. A failure of the
    connection is an HTTPClientError (tried again), as botocore's session says it."""
    body = botocore.response.StreamingBody(answer.raw, None)  # type: ignore[arg-type]
    parts: list[bytes] = []
    size = 0
    try:
        for part in body.iter_chunks(CHUNK):
            size += len(part)
            if size > MAX_ANSWER:
                body.close()
                raise UnreadableAnswer(
                    reason=f"more than {MAX_ANSWER // 2**20} MiB, longer than any S3 answer"
                )
            parts.append(part)
    except botocore.exceptions.BotoCoreError:
        raise
    except Exception as error:  # what urllib3 raises, mapped as botocore's session maps it
        raise botocore.exceptions.HTTPClientError(error=error) from None
    return b"".join(parts)


def _said(error: botocore.exceptions.ClientError) -> str:
    """`HTTP 403 AccessDenied`: the status and the error code the server gave; a code that
    is none of S3's (a newline, a text) is quoted and cut short, so it stays on its line."""
    status, code = _status(error), _code(error)
    if not code or code == str(status):  # botocore's code for an answer without one
        return f"HTTP {status}"
    return f"HTTP {status} {code if _S3_CODE.fullmatch(code) else shown(code)}"


_S3_CODE = re.compile(r"[A-Za-z0-9.]{1,64}")
_REGION = re.compile(r"[a-z]{2,}(-[a-z0-9]+){1,4}")  # eu-west-1, us-gov-east-1, cn-north-1


def _region_named(error: Exception) -> str | None:
    """The bucket's region as an answer to a request sent to another region names it (a
    301 PermanentRedirect's `x-amz-bucket-region`, a 400's `<Region>`), where it is one."""
    if not isinstance(error, botocore.exceptions.ClientError) or _status(error) not in (301, 400):
        return None
    headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    named = error.response.get("Error", {}).get("Region") or headers.get("x-amz-bucket-region")
    return named if isinstance(named, str) and _REGION.fullmatch(named) else None


def _code(error: botocore.exceptions.ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: botocore.exceptions.ClientError) -> int:
    meta = error.response.get("ResponseMetadata", {})
    status = meta.get("HTTPStatusCode")
    if isinstance(status, int):
        return status
    code = str(error.response.get("Error", {}).get("Code", ""))
    return 404 if code in ("NoSuchKey", "404", "NotFound") else 0
