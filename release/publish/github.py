"""GitHub Releases: one release per tag, assets uploaded to a draft, verified, then published.

The publisher converges: every run finds the release for the tag (drafts included, which
only the release list shows), removes what failed uploads left behind, uploads what is
missing, checks size and sha256 of every asset against the manifest and publishes the
draft only then. A run that stops anywhere can be re-run; it uploads nothing twice.

Transient failures (5xx, broken connections, rate limits) are retried here, not by
githubkit, so that every wait goes through one policy with one bound on total time, and
so that a failed upload or release creation is reconciled (re-listed) before it is tried
again: GitHub may have stored what it answered 502 to.

The pure part (parsing GitHub's JSON, URLs, names, the retry classifier) comes first; the
`GithubPublisher` class at the bottom is the edge that talks HTTP through githubkit.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from githubkit import GitHub, Response, TokenAuthStrategy
from githubkit.exception import RequestError, RequestFailed
from githubkit.utils import UNSET

from release.errors import ConflictError, PublishError
from release.manifest import WheelEntry
from release.publish.base import Action, FileDecision, PublishPlan, RemoteFile
from release.retry import (
    Clock,
    Deadline,
    RetryExhausted,
    RetryPolicy,
    Sleep,
    TryAgain,
    call_with_retries,
)

__all__ = [
    "API_VERSION",
    "GITHUB_ASSET_LIMIT",
    "AssetInfo",
    "GithubPublisher",
    "ReleaseInfo",
    "RequestStats",
    "asset_name_problem",
    "choose_release",
    "classify",
    "download_url",
    "next_link",
    "parse_asset",
    "parse_release",
    "sha256_of_digest",
    "upload_endpoint",
    "web_base",
    "web_base_of_release",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

API_VERSION: Literal["2022-11-28"] = "2022-11-28"
GITHUB_ASSET_LIMIT = 2 * 1024**3 - 1  # "each file included in a release must be under 2 GiB"
SECONDARY_LIMIT_WAIT = 60.0  # GitHub: wait at least one minute, then back off
PER_PAGE = 100
_API_HEADERS = {"X-GitHub-Api-Version": API_VERSION, "Accept": "application/vnd.github+json"}
_TRANSIENT = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)
_KEPT_BY_GITHUB = re.compile(r"[A-Za-z0-9._+-]")
_PERMISSION_HINT = (
    "the token needs `contents: write` on {repo} (a workflow job: `permissions: contents: "
    "write`; a fine-grained token: Contents read and write)"
)


# -- records and parsing ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReleaseInfo:
    id: int
    tag: str
    draft: bool
    immutable: bool
    url: str
    html_url: str
    upload_url: str  # the hypermedia template, `.../assets{?name,label}`


@dataclass(frozen=True, kw_only=True)
class AssetInfo:
    id: int
    name: str
    size: int
    state: str  # "uploaded"; "starter"/"new"/"open" are leftovers of failed uploads
    sha256: str | None  # from `digest`, None where the server reports none
    url: str
    browser_download_url: str


@dataclass(frozen=True, kw_only=True)
class RequestStats:
    """Requests sent (redirects and retries included) and the asset bytes sent."""

    by_method: Mapping[str, int]
    bytes_uploaded: int

    @property
    def writes(self) -> int:
        return sum(n for method, n in self.by_method.items() if method not in ("GET", "HEAD"))


def _field(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PublishError(
            f"GitHub answered with an unexpected {key!r} ({type(value).__name__})",
            hint="is the API URL in matrix.yaml a GitHub REST API (api.github.com or "
            "https://HOST/api/v3)?",
        )
    return value


def sha256_of_digest(digest: object) -> str | None:
    """The hex sha256 of a `digest` field (`sha256:<hex>`); None for anything else."""
    if isinstance(digest, str) and digest.startswith("sha256:"):
        value = digest[len("sha256:") :].lower()
        if re.fullmatch(r"[0-9a-f]{64}", value):
            return value
    return None


def parse_release(data: object) -> ReleaseInfo:
    if not isinstance(data, Mapping):
        raise PublishError("GitHub answered with something that is not a release")
    return ReleaseInfo(
        id=_field(data, "id", int),
        tag=_field(data, "tag_name", str),
        draft=_field(data, "draft", bool),
        immutable=data.get("immutable") is True,
        url=_field(data, "url", str),
        html_url=_field(data, "html_url", str),
        upload_url=_field(data, "upload_url", str),
    )


def parse_asset(data: object) -> AssetInfo:
    """One asset as plain JSON: leftovers carry states outside githubkit's model."""
    if not isinstance(data, Mapping):
        raise PublishError("GitHub answered with something that is not a release asset")
    return AssetInfo(
        id=_field(data, "id", int),
        name=_field(data, "name", str),
        size=_field(data, "size", int),
        state=_field(data, "state", str),
        sha256=sha256_of_digest(data.get("digest")),
        url=_field(data, "url", str),
        browser_download_url=_field(data, "browser_download_url", str),
    )


def upload_endpoint(upload_url: str) -> str:
    """The release's `upload_url` without its `{?name,label}` template part."""
    return upload_url.split("{", 1)[0]


def next_link(link_header: str | None) -> str | None:
    """The `rel="next"` URL of a `Link` header, if any."""
    for part in (link_header or "").split(","):
        match = re.fullmatch(r"\s*<([^>]*)>\s*;(.*)", part)
        if match and re.search(r'rel="?([^";]*\s)?next(\s[^";]*)?"?', match.group(2)):
            return match.group(1)
    return None


def web_base(api_url: str) -> str:
    """The web origin of a REST API base: github.com, a GitHub Enterprise host, or (a
    server serving both from one origin) the API base itself."""
    base = api_url.rstrip("/")
    parts = urlsplit(base)
    if parts.hostname == "api.github.com":
        return "https://github.com"
    if parts.path.endswith("/api/v3"):
        return base[: -len("/api/v3")]
    return base


def web_base_of_release(html_url: str, repository: str) -> str | None:
    """The web origin in a release's `html_url` (`<web>/<owner>/<repo>/releases/tag/...`)."""
    marker = f"/{repository}/releases/"
    index = html_url.lower().find(marker.lower())
    return html_url[:index] if index > 0 else None


def download_url(web: str, repository: str, tag: str, name: str) -> str:
    return f"{web}/{repository}/releases/download/{quote(tag, safe='/')}/{quote(name, safe='+@')}"


def asset_name_problem(name: str) -> str | None:
    """Why GitHub would store an asset under another name than `name`, if it would.

    GitHub's upload endpoint renames "special characters" to "." and drops leading and
    trailing periods (observed: spaces, parentheses, "~", ":", "%", "!"); "+" survives
    when it is sent percent-encoded, which httpx does. Anything outside letters, digits
    and "._+-" is refused rather than guessed at.
    """
    if not name:
        return "the name is empty"
    odd = sorted({c for c in name if not _KEPT_BY_GITHUB.fullmatch(c)})
    if odd:
        shown = " ".join(repr(c) for c in odd)
        return f"GitHub would rename it: it replaces {shown} with '.'"
    if name.startswith(".") or name.endswith("."):
        return "GitHub would rename it: it drops leading and trailing periods"
    if ".." in name:
        return "GitHub would rename it: it collapses runs of periods"
    return None


def choose_release(releases: Sequence[ReleaseInfo], tag: str) -> ReleaseInfo | None:
    """The release of `tag`: the published one, else the oldest draft (the one an earlier
    run created and uploaded to; GitHub lets drafts share a tag)."""
    mine = [r for r in releases if r.tag == tag]
    published = [r for r in mine if not r.draft]
    if published:
        return published[0]
    return min(mine, key=lambda r: r.id) if mine else None


def _message(response: Response[Any]) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200].strip()
    if isinstance(data, Mapping):
        message = str(data.get("message") or "")
        errors = data.get("errors")
        if isinstance(errors, list):
            codes = [
                str(e.get("code") or e.get("message")) for e in errors if isinstance(e, Mapping)
            ]
            message += f" ({', '.join(codes)})" if codes else ""
        return message
    return ""


def _status(response: Response[Any]) -> str:
    reason = response.reason_phrase
    return f"{response.status_code} {reason}" if reason else str(response.status_code)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def classify(error: Exception, now: float) -> TryAgain | None:
    """Whether a failed request is worth another try, and how long GitHub asks to wait.

    `now` is the wall clock in seconds since the epoch, to read `x-ratelimit-reset`.
    """
    if isinstance(error, _Reconcile):
        return TryAgain(reason=error.reason, after=error.after)
    if isinstance(error, RequestFailed):
        response = error.response
        status = response.status_code
        if status >= 500:
            return TryAgain(reason=_status(response))
        if status not in (403, 429):
            return None
        headers = response.headers
        message = _message(response)
        retry_after = _seconds(headers.get("retry-after"))
        if retry_after is not None:
            return TryAgain(reason=f"{_status(response)}: {message}", after=retry_after)
        reset = _seconds(headers.get("x-ratelimit-reset"))
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            wait = max(reset - now, 0.0) + 1.0
            return TryAgain(reason=f"rate limit exceeded, it resets in {wait:.0f} s", after=wait)
        if status == 429 or "rate limit" in message.lower():
            return TryAgain(
                reason=f"{_status(response)}: {message or 'rate limited'}",
                at_least=SECONDARY_LIMIT_WAIT,
            )
        return None
    if isinstance(error, RequestError) and isinstance(error.exc, _TRANSIENT):
        detail = str(error.exc)
        name = type(error.exc).__name__
        return TryAgain(reason=f"connection failed ({name}{': ' + detail if detail else ''})")
    return None


class _Reconcile(Exception):
    """An attempt that must look at GitHub's state again before the next one."""

    def __init__(self, reason: str, *, after: float | None = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class _Token:
    """The token, kept out of repr, str and tracebacks' locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "<token>"

    __str__ = __repr__


# -- the publisher ---------------------------------------------------------------------


class GithubPublisher:
    """The GitHub Releases destination of one repository and tag (see the module doc).

    `token` comes from the caller (GITHUB_TOKEN); it is held so that it cannot be printed
    and is scrubbed from every message. `sleep` and `clock` (wall clock, seconds since
    the epoch) are injectable so tests can run the waits without spending them.
    """

    def __init__(
        self,
        *,
        repository: str,
        tag: str,
        api_url: str,
        token: str,
        policy: RetryPolicy | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        name: str = "github",
        target_commitish: str | None = None,
    ) -> None:
        owner, _, repo = repository.partition("/")
        if not owner or not repo or "/" in repo:
            raise PublishError(f"GitHub repository {repository!r} is not owner/name")
        self.name = name
        self.repository = repository
        self.tag = tag
        self.api_url = api_url.rstrip("/")
        self.policy = policy or RetryPolicy()
        self.target_commitish = target_commitish
        self._owner, self._repo = owner, repo
        self._token = _Token(token)
        self._sleep = sleep
        self._clock = clock
        self._gh: GitHub[TokenAuthStrategy] | None = None
        self._deadline: Deadline | None = None
        self._seen: ReleaseInfo | None = None
        self._methods: Counter[str] = Counter()
        self._bytes_uploaded = 0
        self._hashed: dict[tuple[int, int], str] = {}

    def __repr__(self) -> str:
        return (
            f"GithubPublisher(repository={self.repository!r}, tag={self.tag!r}, "
            f"api_url={self.api_url!r})"
        )

    @property
    def stats(self) -> RequestStats:
        return RequestStats(by_method=dict(self._methods), bytes_uploaded=self._bytes_uploaded)

    # -- Publisher protocol -------------------------------------------------------------

    def existing(self, entries: Sequence[WheelEntry]) -> Mapping[str, RemoteFile]:
        wanted = {e.filename: e for e in entries}
        with self._session(done=[]):
            release = self._find_release()
            self._seen = release
            if release is None:
                return {}
            found: dict[str, RemoteFile] = {}
            for asset in self._list_assets(release):
                entry = wanted.get(asset.name)
                if entry is None:
                    continue
                found[asset.name] = RemoteFile(
                    name=asset.name,
                    size=asset.size,
                    sha256=self._sha256_of(asset, entry),
                    url=asset.browser_download_url,
                    state=asset.state,
                )
            return found

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        destination = entry.destination
        if destination.kind != "github" or (destination.repository, destination.tag) != (
            self.repository,
            self.tag,
        ):
            return f"belongs to {destination.name}, not the GitHub release {self.where}"
        problem = asset_name_problem(entry.filename)
        if problem is not None:
            return problem
        try:
            size = wheel.stat().st_size
        except FileNotFoundError:
            return f"{wheel} does not exist"
        except OSError as error:
            return f"{wheel} cannot be read: {error.strerror}"
        if size != entry.size:
            return f"{wheel} is {size} bytes, the manifest says {entry.size}"
        limit = min(destination.max_file_size, GITHUB_ASSET_LIMIT)
        if entry.size > limit:
            return f"{entry.size} bytes is over the {limit}-byte limit of {destination.name}"
        return None

    def final_url(self, entry: WheelEntry) -> str:
        web = None
        if self._seen is not None:
            web = web_base_of_release(self._seen.html_url, self.repository)
        return download_url(
            web or web_base(self.api_url), self.repository, self.tag, entry.filename
        )

    def apply(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        if plan.blocked:
            conflicts = [d.entry.filename for d in plan.with_action(Action.CONFLICT)]
            refused = [d.entry.filename for d in plan.with_action(Action.REFUSED)]
            error = ConflictError if conflicts else PublishError
            raise error(
                f"refusing to publish to {self.where}: the plan is blocked by "
                + ", ".join(conflicts + refused),
                hint="resolve the conflicts (or pass --replace) and the refusals, then plan again",
            )
        keep = (Action.UPLOAD, Action.SKIP, Action.REPLACE)
        wanted = [d.entry for d in plan.decisions if d.action in keep]
        replace_names = {d.entry.filename for d in plan.with_action(Action.REPLACE)}
        done: list[str] = []
        with self._session(done=done):
            release = self._find_release()
            if release is None:
                release = self._create_draft()
                done.append(f"created the draft release {self.tag}")
            assets = {a.name: a for a in self._list_assets(release)}
            doomed, missing = self._triage(wanted, assets, replace_names)
            if missing and release.immutable:
                raise PublishError(
                    f"the release {self.where} is immutable: {len(missing)} asset(s) "
                    "cannot be added or replaced",
                    hint="publish these wheels under a new version",
                )
            for asset, what in doomed:
                self._delete_asset(release, asset)
                del assets[asset.name]
                done.append(f"deleted the {what} {asset.name}")
            for entry in missing:
                assets[entry.filename] = self._upload(release, entry, dist)
                done.append(f"uploaded {entry.filename}")
            if done:
                assets = {a.name: a for a in self._list_assets(release)}
            self._check_complete(wanted, assets)
            if release.draft:
                self._publish(release)
                done.append(f"published {self.tag}")
                release = self._get_release(release.id)
                assets = {a.name: a for a in self._list_assets(release)}
            self._seen = release
        return tuple(
            replace(d, url=assets[d.entry.filename].browser_download_url)
            if d.entry.filename in assets
            else d
            for d in plan.decisions
        )

    # -- steps of a run -----------------------------------------------------------------

    @property
    def where(self) -> str:
        return f"{self.repository}@{self.tag}"

    def _triage(
        self,
        wanted: Sequence[WheelEntry],
        assets: Mapping[str, AssetInfo],
        replace_names: Collection[str],
    ) -> tuple[list[tuple[AssetInfo, str]], list[WheelEntry]]:
        """What stands in the way (leftovers, assets to replace) and what to upload."""
        doomed: list[tuple[AssetInfo, str]] = []
        missing: list[WheelEntry] = []
        for entry in wanted:
            current = assets.get(entry.filename)
            if current is not None and current.state != "uploaded":
                doomed.append((current, f"leftover ({current.state})"))
            elif current is not None:
                sha256 = self._sha256_of(current, entry)
                if sha256 == entry.sha256 and current.size == entry.size:
                    continue
                if entry.filename not in replace_names:
                    raise ConflictError(
                        f"{entry.filename}: {self.where} holds other bytes under this name "
                        f"(sha256 {(sha256 or 'unknown')[:12]}..., built "
                        f"{entry.sha256[:12]}...)",
                        hint="pass --replace to replace it, or bump the version",
                    )
                doomed.append((current, "replaced asset"))
            missing.append(entry)
        return doomed, missing

    def _sha256_of(self, asset: AssetInfo, entry: WheelEntry) -> str | None:
        """The asset's sha256: its digest, or (where the server reports none and the size
        matches, so that the bytes could be the same) the hash of its download."""
        if asset.sha256 is not None or asset.state != "uploaded" or asset.size != entry.size:
            return asset.sha256
        return self._download_sha256(asset)

    def _check_complete(
        self, wanted: Sequence[WheelEntry], assets: Mapping[str, AssetInfo]
    ) -> None:
        bad = []
        for entry in wanted:
            asset = assets.get(entry.filename)
            if asset is None:
                bad.append(f"{entry.filename} is missing")
            elif asset.state != "uploaded" or self._sha256_of(asset, entry) != entry.sha256:
                bad.append(f"{entry.filename} does not match the manifest")
        if bad:
            raise PublishError(
                f"{self.where} is incomplete after uploading: " + "; ".join(bad),
                hint="re-run `release publish`; it uploads what is missing",
            )

    def _find_release(self) -> ReleaseInfo | None:
        """The release of the tag: the published one by tag (one request), else a draft
        from the release list (drafts are 404 by tag)."""
        rest = self._client().rest(API_VERSION)
        response = self._request(
            f"look up the release {self.tag}",
            lambda: rest.repos.get_release_by_tag(self._owner, self._repo, self.tag),
            accept=(404,),
        )
        if response.status_code == 200:
            return parse_release(response.json())
        releases = self._list(
            "list releases",
            lambda: rest.repos.list_releases(self._owner, self._repo, per_page=PER_PAGE),
        )
        return choose_release([parse_release(r) for r in releases], self.tag)

    def _get_release(self, release_id: int) -> ReleaseInfo:
        rest = self._client().rest(API_VERSION)
        response = self._request(
            f"read the release {self.tag}",
            lambda: rest.repos.get_release(self._owner, self._repo, release_id),
        )
        return parse_release(response.json())

    def _list_assets(self, release: ReleaseInfo) -> list[AssetInfo]:
        rest = self._client().rest(API_VERSION)
        items = self._list(
            f"list the assets of {self.tag}",
            lambda: rest.repos.list_release_assets(
                self._owner, self._repo, release.id, per_page=PER_PAGE
            ),
        )
        return [parse_asset(item) for item in items]

    def _asset_named(self, release: ReleaseInfo, name: str) -> AssetInfo | None:
        return next((a for a in self._list_assets(release) if a.name == name), None)

    def _create_draft(self) -> ReleaseInfo:
        rest = self._client().rest(API_VERSION)

        def attempt(retry: int) -> ReleaseInfo:
            if retry:
                found = self._find_release()
                if found is not None:
                    log.info("the release %s exists after all; using it", self.tag)
                    return found
            log.info("creating the draft release %s on %s", self.tag, self.repository)
            response = self._send(
                f"create the release {self.tag}",
                lambda: rest.repos.create_release(
                    self._owner,
                    self._repo,
                    tag_name=self.tag,
                    name=self.tag,
                    draft=True,
                    target_commitish=self.target_commitish or UNSET,
                ),
                accept=(422,),
            )
            if response.status_code == 422:
                if "already_exists" not in _message(response):
                    raise PublishError(
                        f"GitHub refused to create the release {self.where}: "
                        + self._token.scrub(_message(response)),
                        hint="check the tag template in matrix.yaml",
                    )
                raise _Reconcile("a release with this tag appeared meanwhile")
            created = response.parsed_data
            return ReleaseInfo(
                id=created.id,
                tag=created.tag_name,
                draft=created.draft,
                immutable=created.immutable is True,
                url=created.url,
                html_url=created.html_url,
                upload_url=created.upload_url,
            )

        return self._retrying(f"create the release {self.tag}", attempt)

    def _publish(self, release: ReleaseInfo) -> ReleaseInfo:
        rest = self._client().rest(API_VERSION)

        def attempt(retry: int) -> ReleaseInfo:
            if retry:
                current = self._get_release(release.id)
                if not current.draft:
                    return current
            log.info("publishing the release %s", self.tag)
            response = self._send(
                f"publish the release {self.tag}",
                lambda: rest.repos.update_release(self._owner, self._repo, release.id, draft=False),
                accept=(422,),
            )
            if response.status_code == 422:
                raise PublishError(
                    f"GitHub refused to publish {self.where}: "
                    + self._token.scrub(_message(response)),
                    hint="another published release has this tag; delete one of them",
                )
            return parse_release(response.json())

        return self._retrying(f"publish the release {self.tag}", attempt)

    def _delete_asset(self, release: ReleaseInfo, asset: AssetInfo) -> None:
        rest = self._client().rest(API_VERSION)
        log.info("deleting %s (%s) from %s", asset.name, asset.state, self.tag)
        self._request(
            f"delete {asset.name}",
            lambda: rest.repos.delete_release_asset(self._owner, self._repo, asset.id),
            accept=(404,),
        )

    def _upload(self, release: ReleaseInfo, entry: WheelEntry, dist: Path) -> AssetInfo:
        path = dist / entry.filename
        try:
            data = path.read_bytes()
        except OSError as error:
            raise PublishError(f"cannot read {path}: {error.strerror}") from None
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise PublishError(
                f"{path} is not the file in the manifest (size or sha256 differs)",
                hint="rebuild with `release build`, or restore the dist directory",
            )
        endpoint = upload_endpoint(release.upload_url)
        gh = self._client()

        def attempt(retry: int) -> AssetInfo:
            if retry:
                current = self._asset_named(release, entry.filename)
                if (
                    current is not None
                    and current.state == "uploaded"
                    and self._sha256_of(current, entry) == entry.sha256
                ):
                    log.info(
                        "%s was stored by the failed attempt; not sending it again", entry.filename
                    )
                    return current
                if current is not None and current.state == "uploaded":
                    raise ConflictError(
                        f"{entry.filename}: another upload to {self.where} stored other "
                        "bytes under this name meanwhile",
                        hint="make sure one publish runs at a time, then re-run",
                    )
                if current is not None:
                    self._delete_asset(release, current)
            log.info("uploading %s (%d bytes) to %s", entry.filename, len(data), self.tag)
            self._bytes_uploaded += len(data)
            response = self._send(
                f"upload {entry.filename}",
                lambda: gh.request(
                    "POST",
                    endpoint,
                    params={"name": entry.filename},
                    content=data,
                    headers={
                        **_API_HEADERS,
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(len(data)),
                    },
                ),
                accept=(422,),
            )
            if response.status_code == 422:
                raise _Reconcile(f"GitHub already has an asset named {entry.filename}")
            asset = parse_asset(response.json())
            if asset.name != entry.filename:
                raise PublishError(
                    f"GitHub stored {entry.filename} as {asset.name}",
                    hint="rename the wheel to letters, digits and ._+- only",
                )
            if asset.size != len(data) or asset.sha256 not in (None, entry.sha256):
                self._delete_asset(release, asset)
                raise _Reconcile(
                    f"GitHub stored {asset.size} bytes of {entry.filename} with another digest",
                    after=None,
                )
            return asset

        return self._retrying(f"upload {entry.filename}", attempt)

    def _download_sha256(self, asset: AssetInfo) -> str:
        """The sha256 of an asset's bytes, for servers whose answers carry no digest."""
        known = self._hashed.get((asset.id, asset.size))
        if known is not None:
            return known
        gh = self._client()

        def attempt(retry: int) -> str:
            response = self._send(
                f"download {asset.name}",
                lambda: gh.request(
                    "GET",
                    asset.url,
                    stream=True,
                    headers={**_API_HEADERS, "Accept": "application/octet-stream"},
                ),
            )
            digest = hashlib.sha256()
            for chunk in response.iter_bytes(1 << 20):
                digest.update(chunk)
            self._hashed[(asset.id, asset.size)] = digest.hexdigest()
            return digest.hexdigest()

        return self._retrying(f"download {asset.name}", attempt)

    # -- HTTP with retries --------------------------------------------------------------

    @contextmanager
    def _session(self, *, done: list[str]) -> Iterator[None]:
        """One operation: one connection pool, one deadline, failures as PublishError."""
        self._deadline = Deadline(self.policy.total, self._clock)
        self._gh = GitHub(
            TokenAuthStrategy(self._token.reveal()),
            base_url=self.api_url,
            auto_retry=False,
            http_cache=False,
            timeout=self.policy.request_timeout,
            user_agent="release-orchestrator (githubkit)",
            event_hooks={"request": [self._count]},
        )
        try:
            with self._gh:
                yield
        except RetryExhausted as error:
            progress = "; ".join(done) if done else "nothing was changed"
            raise PublishError(
                self._token.scrub(f"GitHub {self.where}: {error} (done so far: {progress})"),
                hint="re-running `release publish` resumes where this run stopped",
            ) from None
        except PublishError as error:
            error.message = self._token.scrub(error.message)
            error.args = (error.message,)
            raise
        finally:
            self._gh = None
            self._deadline = None

    def _count(self, request: httpx.Request) -> None:
        self._methods[request.method] += 1

    def _client(self) -> GitHub[TokenAuthStrategy]:
        if self._gh is None:
            raise RuntimeError("a GitHub request outside of a session")
        return self._gh

    def _retrying(self, what: str, attempt: Callable[[int], T]) -> T:
        if self._deadline is None:
            raise RuntimeError("a GitHub request outside of a session")
        return call_with_retries(
            attempt,
            classify=lambda error: classify(error, self._clock()),
            policy=self.policy,
            deadline=self._deadline,
            sleep=self._sleep,
            what=what,
            on_retry=lambda verdict, delay, retry: log.warning(
                "%s: %s; retrying in %.0f s (retry %d of %d)",
                what,
                self._token.scrub(verdict.reason),
                delay,
                retry,
                self.policy.attempts - 1,
            ),
        )

    def _request(
        self, what: str, call: Callable[[], Response[Any]], *, accept: Collection[int] = ()
    ) -> Response[Any]:
        """An idempotent request, retried as it is."""
        return self._retrying(what, lambda retry: self._send(what, call, accept=accept))

    def _list(self, what: str, first: Callable[[], Response[Any]]) -> list[Any]:
        """Every item of a paginated list, following the `Link: rel="next"` URLs."""
        gh = self._client()
        items: list[Any] = []
        call = first
        while True:
            response = self._request(what, call)
            page = response.json()
            if not isinstance(page, list):
                raise PublishError(f"GitHub answered {what} with something that is not a list")
            items.extend(page)
            url = next_link(response.headers.get("link"))
            if url is None:
                return items
            call = _bind_get(gh, url)

    def _send(
        self, what: str, call: Callable[[], Response[Any]], *, accept: Collection[int] = ()
    ) -> Response[Any]:
        """One attempt. Transient failures propagate for the retry loop to classify;
        statuses in `accept` come back as answers; every other failure is a PublishError."""
        try:
            return call()
        except RequestFailed as error:
            response = error.response
            if response.status_code in accept:
                return response
            if classify(error, self._clock()) is not None:
                raise
            raise self._refusal(what, response) from None
        except RequestError as error:
            if classify(error, self._clock()) is not None:
                raise
            raise PublishError(
                self._token.scrub(f"cannot {what} at {self.api_url}: {error.exc}"),
                hint="check `api_url` in matrix.yaml",
            ) from None

    def _refusal(self, what: str, response: Response[Any]) -> PublishError:
        status = response.status_code
        message = self._token.scrub(_message(response))
        if status == 401:
            return PublishError(
                f"GitHub rejected the token (GITHUB_TOKEN) at {self.api_url}: {message}",
                hint="set GITHUB_TOKEN to a valid, unexpired token; "
                + _PERMISSION_HINT.format(repo=self.repository),
            )
        if status == 403:
            return PublishError(
                f"GitHub refused to {what} on {self.repository}: {message}",
                hint=_PERMISSION_HINT.format(repo=self.repository),
            )
        if status == 404:
            return PublishError(
                f"GitHub answered 404 to {what}: {self.repository} does not exist at "
                f"{self.api_url}, or the token cannot see it",
                hint="check `repository` and `api_url` in matrix.yaml and the token's access",
            )
        return PublishError(f"GitHub answered {_status(response)} to {what}: {message}")


def _bind_get(gh: GitHub[TokenAuthStrategy], url: str) -> Callable[[], Response[Any]]:
    def call() -> Response[Any]:
        return gh.request("GET", url, headers=_API_HEADERS)

    return call
