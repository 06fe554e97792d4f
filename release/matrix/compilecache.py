"""Where the compiles of a build keep their objects: matrix.yaml's `compile-cache:`, or
`--compile-cache` / RELEASE_COMPILE_CACHE, which replace it. The cmake and torch backends
(and csrc's nvcc) compile through sccache; this says which storage its server uses.

Pure: the `compile-cache:` section (`CompileCacheSpec`), its rules, and the one-line form
`none`, `local`, `local:DIR`, `github-actions` or `s3://BUCKET/PREFIX?endpoint=URL&region=R`.
No credential is ever part of it: S3 keys come from the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY), read by sccache itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import parse_qsl, urlsplit

from release.credentials import has_credentials
from release.errors import shown
from release.yamlspec import optional

Storage = Literal["local", "s3", "github-actions", "none"]
STORAGES: tuple[Storage, ...] = get_args(Storage)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
PREFIX = re.compile(r"[A-Za-z0-9._/-]*")
_REGION = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")  # as botocore takes one
_HOST_URL = re.compile(r"https?://[^/\s?#@]+/?")


@dataclass(frozen=True)
class CompileCacheSpec:
    """The compile cache (sccache's storage) of the cmake and torch backends' compiles and
    csrc's nvcc compiles."""

    storage: Storage | None = optional(
        "local (default: a directory of the cache dir), s3, github-actions (the workflow's "
        "Actions cache) or none"
    )
    dir: str | None = optional("local: the directory (default: <cache dir>/compile)")
    bucket: str | None = optional("s3: the bucket")
    endpoint: str | None = optional("s3: the S3 API's URL, for storage other than AWS")
    region: str | None = optional("s3: the region (default: auto)")
    prefix: str | None = optional("s3: a key prefix, to share a bucket (k3-kernels/)")


@dataclass(frozen=True, kw_only=True)
class CompileCache:
    """A validated compile cache. `dir` None: the default directory of the cache dir."""

    storage: Storage = "local"
    dir: Path | None = None
    bucket: str | None = None
    endpoint: str | None = None
    region: str | None = None
    prefix: str = ""

    @property
    def remote(self) -> bool:
        """Its objects outlive the machine (and it can be out of reach)."""
        return self.storage in ("s3", "github-actions")

    def describe(self) -> str:
        """One line for the log and the step summary (no credential is ever part of it)."""
        if self.storage == "s3":
            where = f"s3://{self.bucket}/{self.prefix}"
            return where + (f" at {self.endpoint}" if self.endpoint else "")
        if self.storage == "local":
            return f"local directory {self.dir}" if self.dir else "local directory"
        return {"github-actions": "the GitHub Actions cache", "none": "off"}[self.storage]


def spec_problems(spec: CompileCacheSpec) -> list[tuple[str, str]]:
    """(key, message) for each rule the section breaks."""
    storage = spec.storage or "local"
    problems: list[tuple[str, str]] = []
    only = {"dir": "local", "bucket": "s3", "endpoint": "s3", "region": "s3", "prefix": "s3"}
    for key, owner in only.items():
        if getattr(spec, key) is not None and storage != owner:
            problems.append((key, f"{key!r} is only for storage {owner} (remove it)"))
    if storage == "s3":
        problems += [(k, m) for k, m in s3_problems(spec.bucket, spec.endpoint, spec.region)]
        if spec.prefix is not None and not PREFIX.fullmatch(spec.prefix):
            problems.append(("prefix", f"{shown(spec.prefix)}: letters, digits, ._-/ only"))
    return problems


def s3_problems(
    bucket: str | None, endpoint: str | None, region: str | None
) -> list[tuple[str, str]]:
    problems = []
    if bucket is None:
        problems.append(("storage", "storage s3 needs a bucket: add bucket: NAME"))
    elif not _BUCKET.fullmatch(bucket):
        problems.append(("bucket", f"{shown(bucket)} is not an S3 bucket name"))
    if endpoint is not None and has_credentials(endpoint):
        problems.append(
            ("endpoint", f"{shown(endpoint)} holds credentials: the keys go in "
             "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY")
        )  # fmt: skip
    elif endpoint is not None and not _is_host_url(endpoint):
        problems.append(("endpoint", f"{shown(endpoint)} is not an http(s) URL of a host"))
    if region is not None and not _REGION.fullmatch(region):
        problems.append(("region", f"{shown(region)} is not a region name"))
    return problems


def _is_host_url(url: str) -> bool:
    """`http(s)://HOST[:PORT][/]`, as a URL parser reads it (`http://[::1` and a port past
    65535 match the shape but are no URL)."""
    if not _HOST_URL.fullmatch(url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # ValueError where the port is none
    except ValueError:
        return False
    return bool(parts.hostname)


def from_spec(spec: CompileCacheSpec | None, base: Path) -> CompileCache:
    """The section as a `CompileCache` (checked first with `spec_problems`); a relative
    `dir` is taken from `base`, the matrix's directory."""
    if spec is None:
        return CompileCache()
    return CompileCache(
        storage=spec.storage or "local",
        dir=base / spec.dir if spec.dir else None,
        bucket=spec.bucket,
        endpoint=spec.endpoint.rstrip("/") if spec.endpoint else None,
        region=spec.region,
        prefix=with_slash(spec.prefix or ""),
    )


def parse_compile_cache(text: str) -> CompileCache:
    """`--compile-cache` / RELEASE_COMPILE_CACHE: `none`, `local`, `local:DIR`,
    `github-actions` or `s3://BUCKET[/PREFIX][?endpoint=URL&region=R]`; ValueError with what
    is wrong otherwise."""
    value = text.strip()
    if value in ("none", "local", "github-actions"):
        return CompileCache(storage=value)  # type: ignore[arg-type]
    if value.startswith("local:") and value[len("local:") :]:
        return CompileCache(storage="local", dir=Path(value[len("local:") :]))
    if not value.startswith("s3://"):
        raise ValueError(
            f"{shown(value[:80])}: expected none, local, local:DIR, github-actions or "
            "s3://BUCKET/PREFIX?endpoint=URL&region=R"
        )
    parts = urlsplit(value)
    if parts.username or parts.password:
        raise ValueError("put no credential in the cache's URL: sccache reads AWS_* variables")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - {"endpoint", "region"})
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r} (endpoint and region are known)")
    bucket, prefix = parts.netloc, parts.path.lstrip("/")
    problems = s3_problems(bucket, query.get("endpoint"), query.get("region"))
    if not PREFIX.fullmatch(prefix):
        problems.append(("prefix", f"{shown(prefix)}: letters, digits, ._-/ only"))
    if problems:
        raise ValueError(f"{problems[0][0]}: {problems[0][1]}")
    endpoint = query.get("endpoint")
    return CompileCache(
        storage="s3",
        bucket=bucket,
        endpoint=endpoint.rstrip("/") if endpoint else None,
        region=query.get("region"),
        prefix=with_slash(prefix),
    )


def with_slash(prefix: str) -> str:
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"
