"""What GitHub's REST API returns, as this program reads it: releases, assets, names and
URLs. Pure: GitHub's JSON in, frozen records out; release.remote.github does the requests.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from release.credentials import redact
from release.errors import ConfigError, PublishError, one_line, shown
from release.fsutil import UnreadableDocument, json_document
from release.github_names import api_url_problem, repository_problem

_KEPT_BY_GITHUB = re.compile(r"[A-Za-z0-9._+-]")


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

    @property
    def shown(self) -> str:
        """The name as a message shows it: the server chose it, so a line break or another
        control character in it is escaped and it stays on its line."""
        return one_line(self.name)


@dataclass(frozen=True, kw_only=True)
class RequestStats:
    """Requests sent (redirects and retries included) and the asset bytes sent."""

    by_method: Mapping[str, int]
    bytes_uploaded: int

    @property
    def writes(self) -> int:
        return sum(n for method, n in self.by_method.items() if method not in ("GET", "HEAD"))


def _answered(what: str) -> str:
    return f"GitHub answered `{what}`" if what else "GitHub answered"


def _field(data: Mapping[str, Any], key: str, kind: type, what: str = "") -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PublishError(
            f"{_answered(what)} with an unexpected {key!r} ({type(value).__name__})",
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


def parse_release(data: object, what: str = "") -> ReleaseInfo:
    """A release as GitHub's JSON; PublishError naming the request `what` otherwise."""
    if not isinstance(data, Mapping):
        raise PublishError(f"{_answered(what)} with something that is not a release")
    return ReleaseInfo(
        id=_field(data, "id", int, what),
        tag=_field(data, "tag_name", str, what),
        draft=_field(data, "draft", bool, what),
        immutable=data.get("immutable") is True,
        url=_field(data, "url", str, what),
        html_url=_field(data, "html_url", str, what),
        upload_url=_field(data, "upload_url", str, what),
    )


def parse_asset(data: object, what: str = "") -> AssetInfo:
    """One asset as plain JSON: leftovers carry states outside githubkit's model."""
    if not isinstance(data, Mapping):
        raise PublishError(f"{_answered(what)} with something that is not a release asset")
    return AssetInfo(
        id=_field(data, "id", int, what),
        name=_field(data, "name", str, what),
        size=_field(data, "size", int, what),
        state=_field(data, "state", str, what),
        sha256=sha256_of_digest(data.get("digest")),
        url=_field(data, "url", str, what),
        browser_download_url=_field(data, "browser_download_url", str, what),
    )


def owner_and_name(repository: str) -> tuple[str, str]:
    """`owner/name` split in two; a ConfigError for what is not a GitHub repository's name
    (`a`, `a/..`: a request path built from it would name another endpoint)."""
    problem = repository_problem(repository)
    if problem is not None:
        raise ConfigError([f"{shown(repository)} is not a GitHub repository ({problem})"])
    owner, name = repository.split("/", 1)
    return owner, name


def checked_api_url(api_url: str) -> str:
    """`api_url` without its trailing `/`; a ConfigError for what is not a REST API base."""
    problem = api_url_problem(api_url)
    if problem is not None:
        raise ConfigError(
            [f"GitHub API URL {shown(api_url)}: {problem}"],
            hint="check `api-url` in matrix.yaml, --github-api-url and GITHUB_API_URL",
        )
    return api_url.rstrip("/")


GITHUB_API = "https://api.github.com"  # github.com's REST API, where nothing names another


def upload_endpoint(upload_url: str) -> str:
    """The release's `upload_url` without its `{?name,label}` template part."""
    return upload_url.split("{", 1)[0]


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


def web_base_of_repository(html_url: str, repository: str) -> str | None:
    """The web origin in a repository's `html_url` (`<web>/<owner>/<repo>`)."""
    if not html_url.lower().endswith(f"/{repository.lower()}"):
        return None
    return html_url[: -len(repository) - 1] or None


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


def json_of(response: Any, what: str) -> Any:
    """A 2xx answer's JSON (a githubkit Response), read by release.fsutil's bounded reader;
    PublishError naming the request if none (too large, too deep, not JSON)."""
    path = response.raw_request.url.path
    try:
        return json_document(response.content, f"GitHub's answer to `{what}`")
    except UnreadableDocument as error:
        raise PublishError(
            f"GitHub answered `{what}` ({path}) with no JSON it can read ({error.reason})"
        ) from None


def json_list(response: Any, what: str) -> list[Any]:
    """One page of the list `what` as GitHub's JSON."""
    page = json_of(response, what)
    if not isinstance(page, list):
        path = response.raw_request.url.path
        raise PublishError(f"GitHub answered `{what}` ({path}) with something that is not a list")
    return page


def message_of(response: Any) -> str:
    """What a GitHub error answer (a githubkit Response) says: its message and error codes."""
    try:
        data = json_document(response.content, "GitHub's error answer")
    except UnreadableDocument:
        return str(response.text)[:200].strip()
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


def status_of(response: Any) -> str:
    reason = response.reason_phrase
    return f"{response.status_code} {reason}" if reason else str(response.status_code)


PERMISSION_HINT = (
    "the token needs `contents: write` on {repo} (a workflow job: `permissions: contents: "
    "write`; a fine-grained token: Contents read and write)"
)
# pages of one list read at the most (100,000 releases or assets): a `Link: rel="next"` that
# loops, or a list that never ends, is GitHub's fault and ends the list instead of the run
MAX_PAGES = 1000


# githubkit's reading of a page's next link (githubkit/rest/paginator.py NEXT_LINK_PATTERN)
_NEXT_LINK = re.compile(r'<([^<>]+)>;\s*rel="next"')


def next_link_problem(link: str | None, api_url: str) -> str | None:
    """Why a page's `Link` header must not be followed (None where it names no next page,
    or one under `api_url`): githubkit's paginator asks the next page with the token, so a
    next page on another host, or outside the API's path, would be sent the token."""
    found = _NEXT_LINK.search(link or "")
    if found is None:
        return None
    target = found.group(1)
    parts, api = urlsplit(target), urlsplit(api_url)
    if not parts.scheme and not parts.netloc:
        return None  # relative: githubkit asks it under the API base
    base = api.path.rstrip("/") + "/"
    same_origin = (parts.scheme.lower(), parts.netloc.lower()) == (
        api.scheme.lower(),
        api.netloc.lower(),
    )
    if same_origin and (parts.path + "/").startswith(base):
        return None
    target = redact(target) if len(target) <= 200 else redact(target)[:197] + "..."
    return f'the list\'s `Link: rel="next"` leads off {api_url}, to {target}'


class PageWalk:
    """The pages of one paginated list of the API at `api_url`, as they are read."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self.seen: set[str] = set()

    def step(self, url: str, link: str | None = None) -> str | None:
        """Why the list stops at the page `url` whose `Link` header is `link` (its next
        link came back to a page it gave or leads off the API, or it passed MAX_PAGES), or
        None. Asked before the next page is: githubkit requests it after."""
        if url in self.seen:
            return f'the list\'s `Link: rel="next"` comes back to a page it gave ({url})'
        if len(self.seen) >= MAX_PAGES:
            return f"the list does not end: {MAX_PAGES} pages read"
        self.seen.add(url)
        return next_link_problem(link, self.api_url)


def header_seconds(value: str | None) -> float | None:
    """A header's number of seconds (`retry-after`, `x-ratelimit-reset`); None where it
    is none: an HTTP date, `nan`, a negative number."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


class Reconcile(Exception):
    """An attempt that must look at GitHub's state again before the next one."""

    def __init__(self, reason: str, *, after: float | None = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def refusal_of(
    what: str, *, status: str, message: str, url: str, api_url: str, token_variable: str | None
) -> PublishError:
    """The error of a request GitHub refused for good (`status`: `403 Forbidden`), naming
    the token's variable (None: the request went without one) and the repository of `url`."""
    found = re.search(r"/repos/([^/]+/[^/]+)", url)
    repo = found.group(1) if found else "the repository"
    code = status.split(" ", 1)[0]
    if code == "401":
        variable = token_variable or "GITHUB_TOKEN"
        return PublishError(
            f"GitHub rejected the token ({variable}) at {api_url}: {message}",
            hint=f"set {variable} to a valid, unexpired token; "
            + PERMISSION_HINT.format(repo=repo),
        )
    if code == "403":
        hint = (
            "set GITHUB_TOKEN: this needs a token"
            if token_variable is None
            else PERMISSION_HINT.format(repo=repo)
        )
        return PublishError(f"GitHub refused to {what} on {repo}: {message}", hint=hint)
    if code == "404":
        return PublishError(
            f"GitHub answered 404 to {what}: {repo} does not exist at {api_url}, or the "
            "token cannot see it",
            hint="check `repository` and `api-url` in matrix.yaml and the token's access",
        )
    return PublishError(f"GitHub answered {status} to {what}: {message}")


ATTESTATIONS_PAGE = 100  # the most attestations one answer is asked for (and may hold)


def attestation_items(data: object, what: str) -> list[object]:
    """The items of an attestations answer to `what`, whatever each is; PublishError where
    it holds no list, or more than the page asked for (each costs a signature check)."""
    items = data.get("attestations") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        raise PublishError(f"GitHub answered {what} with no list")
    if len(items) > ATTESTATIONS_PAGE:
        raise PublishError(
            f"GitHub answered {what} with {len(items)} items for a page of {ATTESTATIONS_PAGE}"
        )
    return items
