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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import boto3
import botocore
import botocore.config
import botocore.exceptions

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import PutObjectRequestTypeDef

from release.credentials import S3Credentials, mask
from release.errors import PublishError

DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes


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


class Precondition(Exception):
    """A conditional write whose condition did not hold (412, or If-Match on a key that is
    not there): another writer got there first."""


def etag_of(value: object) -> str:
    return str(value or "").strip('"')


class S3Store:
    """The objects of one bucket, through one boto3 client."""

    def __init__(self, bucket: Bucket, keys: S3Credentials | None) -> None:
        self.bucket = bucket
        self._secrets = keys.values() if keys else ()
        config = botocore.config.Config(
            region_name=bucket.region if bucket.region != "auto" or bucket.endpoint else None,
            # R2 and MinIO take path-style addressing everywhere; AWS takes both
            s3={"addressing_style": "path" if bucket.endpoint else "auto"},
            retries={"mode": "standard", "max_attempts": 5},
            # checksums only where the API requires them: R2 and older MinIO reject the
            # trailing checksums newer clients send by default
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            signature_version=None if keys else botocore.UNSIGNED,
            user_agent_extra="cuda-wheel-release",
        )
        self._client: S3Client = boto3.session.Session().client(
            "s3",
            endpoint_url=bucket.endpoint,
            aws_access_key_id=keys.access_key.reveal() if keys else None,
            aws_secret_access_key=keys.secret_key.reveal() if keys else None,
            aws_session_token=keys.session_token.reveal() if keys and keys.session_token else None,
            config=config,
        )

    # --- reads ---

    def get(self, key: str) -> Stored | None:
        try:
            answer = self._client.get_object(Bucket=self.bucket.name, Key=key)
            data = answer["Body"].read()
        except botocore.exceptions.ClientError as error:
            if _status(error) == 404 and _code(error) != "NoSuchBucket":
                return None
            raise self._failure("GET", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("GET", key, error) from None
        return Stored(
            etag=etag_of(answer.get("ETag")),
            size=len(data),
            metadata=dict(answer.get("Metadata") or {}),
            data=data,
        )

    def head(self, key: str) -> Stored | None:
        try:
            answer = self._client.head_object(Bucket=self.bucket.name, Key=key)
        except botocore.exceptions.ClientError as error:
            if _status(error) == 404:
                return None
            raise self._failure("HEAD", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("HEAD", key, error) from None
        return Stored(
            etag=etag_of(answer.get("ETag")),
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
            answer = self._client.put_object(**request)
        except botocore.exceptions.ClientError as error:
            status = _status(error)
            # 409 ConditionalRequestConflict: a concurrent conditional write to this key
            if conditional and (status in (409, 412) or (status == 404 and if_match)):
                raise Precondition(key) from None
            raise self._failure("PUT", key, error) from None
        except botocore.exceptions.BotoCoreError as error:
            raise self._failure("PUT", key, error) from None
        return etag_of(answer.get("ETag"))

    def copy(self, source: str, target: str) -> bool:
        """A server-side copy of `source` to `target` (metadata kept); False where `source`
        is not there."""
        try:
            self._client.copy_object(
                Bucket=self.bucket.name,
                Key=target,
                CopySource={"Bucket": self.bucket.name, "Key": source},
            )
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
                answer = self._client.delete_objects(
                    Bucket=self.bucket.name,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
                raise self._failure("DELETE", batch[0], error) from None
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise PublishError(
                    f"{self.bucket.describe()}: {len(errors)} of {len(batch)} deletions "
                    f"failed; first {first.get('Key')}: {first.get('Code')}",
                    hint="run the same command again: the deletion is repeated",
                )

    def _failure(self, verb: str, key: str, error: Exception) -> PublishError:
        if isinstance(error, botocore.exceptions.ClientError):
            code = error.response.get("Error", {}).get("Code", "?")
            why = f"HTTP {_status(error)} {code}"
        else:
            why = f"{type(error).__name__}: {error}"
        message = mask(f"{self.bucket.describe()}: {verb} {key} failed: {why}", self._secrets)
        hint = (
            "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket's permissions"
            if "AccessDenied" in why or "Forbidden" in why or "403" in why
            else "check the destination's endpoint and bucket, then run the command again"
        )
        return PublishError(message, hint=hint)


def _code(error: botocore.exceptions.ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: botocore.exceptions.ClientError) -> int:
    meta = error.response.get("ResponseMetadata", {})
    status = meta.get("HTTPStatusCode")
    if isinstance(status, int):
        return status
    code = str(error.response.get("Error", {}).get("Code", ""))
    return 404 if code in ("NoSuchKey", "404", "NotFound") else 0
