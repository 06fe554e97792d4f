"""The one GitHub REST client: githubkit with this program's retry policy, pagination,
digests, and every call the publisher, the plan, the index and verify make.

Transient failures (5xx, broken connections, rate limits in every form GitHub sends them)
are retried here, not by githubkit, so that every wait goes through one `RetryPolicy` with
one bound on the total time of an operation (`session`). A request that changes something
is retried by its caller through `retrying`, after looking at GitHub's state again
(`Reconcile`): GitHub may have stored what it answered 502 to.

The token is held as a `Secret` and scrubbed from every message; without one the client
reads public repositories anonymously (a token only raises the rate limit).

The pure part (parsing GitHub's JSON, URLs, names, the retry classifier) comes first.

githubkit (and pydantic, its models') is imported where a client is made (`session`) and
where what it raised or answered is read, so that a command that makes no GitHub request
loads neither.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx

from release.credentials import Secret
from release.errors import PublishError, one_line
from release.remote.github_model import (
    ATTESTATIONS_PAGE,
    AssetInfo,
    PageWalk,
    Reconcile,
    ReleaseInfo,
    RequestStats,
    attestation_items,
    checked_api_url,
    choose_release,
    header_seconds,
    json_list,
    json_of,
    message_of,
    owner_and_name,
    parse_asset,
    parse_release,
    refusal_of,
    sha256_of,
    status_of,
    upload_endpoint,
    web_base_of_repository,
)
from release.remote.httpclient import AnswerRefused, StreamedAnswers, tls_context, unresolvable
from release.remote.retry import (
    Clock,
    Deadline,
    RetryExhausted,
    RetryPolicy,
    Sleep,
    TryAgain,
    call_with_retries,
)

if TYPE_CHECKING:
    from githubkit import GitHub, Response

log = logging.getLogger(__name__)
T = TypeVar("T")
# which of githubkit's list endpoints, picked from its `repos` namespace
ListOf = Callable[[Any], Callable[..., "Response[Any]"]]

API_VERSION: Literal["2022-11-28"] = "2022-11-28"
GITHUB_ASSET_LIMIT = 2 * 1024**3 - 1  # "each file included in a release must be under 2 GiB"
SECONDARY_LIMIT_WAIT = 60.0  # GitHub: wait at least one minute, then back off
PER_PAGE = 100
API_HEADERS = {"X-GitHub-Api-Version": API_VERSION, "Accept": "application/vnd.github+json"}
_TRANSIENT = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)


@functools.cache
def _github_class() -> type[GitHub[Any]]:
    """githubkit's GitHub, reading a rate limit's wait by `classify`'s rules: githubkit's own
    int() of `retry-after` and `x-ratelimit-reset` raises on an HTTP date (which RFC 9110
    allows), a decimal or a reset past time_t, before the answer reaches `classify`."""
    from githubkit import GitHub

    class Tolerant(GitHub[Any]):
        def _extract_retry_after(self, response: Response[Any]) -> timedelta:
            try:
                return super()._extract_retry_after(response)
            except (ValueError, OverflowError):
                return timedelta(seconds=60)  # githubkit's own default; `classify` decides

    return Tolerant


def classify(error: Exception, now: float) -> TryAgain | None:
    """Whether a failed request is worth another try, and how long GitHub asks to wait.

    `now` is the wall clock in seconds since the epoch, to read `x-ratelimit-reset`.
    """
    if isinstance(error, Reconcile):
        return TryAgain(reason=error.reason, after=error.after)
    from githubkit.exception import RequestError, RequestFailed

    if isinstance(error, RequestFailed):
        response = error.response
        status = response.status_code
        if status >= 500:
            return TryAgain(reason=status_of(response))
        if status not in (403, 429):
            return None
        headers = response.headers
        message = message_of(response)
        retry_after = header_seconds(headers.get("retry-after"))
        if retry_after is not None:
            return TryAgain(reason=f"{status_of(response)}: {message}", after=retry_after)
        reset = header_seconds(headers.get("x-ratelimit-reset"))
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            wait = max(reset - now, 0.0) + 1.0
            return TryAgain(reason=f"rate limit exceeded, it resets in {wait:.0f} s", after=wait)
        if status == 429 or "rate limit" in message.lower():
            return TryAgain(
                reason=f"{status_of(response)}: {message or 'rate limited'}",
                at_least=SECONDARY_LIMIT_WAIT,
            )
        return None
    if isinstance(error, RequestError) and isinstance(error.exc, _TRANSIENT):
        if unresolvable(error.exc):
            return None  # a host name that does not resolve will not resolve on a retry
        detail = str(error.exc)
        name = type(error.exc).__name__
        return TryAgain(reason=f"connection failed ({name}{': ' + detail if detail else ''})")
    return None


# -- the client ------------------------------------------------------------------------


class GithubUnreachable(PublishError):
    """GitHub did not answer within the retry policy: nothing is known of what it holds."""


class GithubClient:
    """The REST API of one GitHub (api.github.com, or a GitHub Enterprise `/api/v3`).

    Every call runs inside `session(...)`, which opens one connection pool, starts the
    operation's deadline and turns what is left of a failure into one PublishError.
    `sleep` and `clock` (wall clock, seconds since the epoch) are injectable so that tests
    run the waits without spending them.
    """

    def __init__(
        self,
        *,
        api_url: str,
        token: Secret | None,
        token_variable: str = "GITHUB_TOKEN",  # noqa: S107 (a variable's name)
        policy: RetryPolicy | None = None,
        sleep: Sleep = time.sleep,
        clock: Clock = time.time,
        command: str = "release publish",
    ) -> None:
        self.api_url = checked_api_url(api_url)
        self.command = command
        self.policy = policy or RetryPolicy()
        self._token = token if token else None
        self.token_variable = token_variable  # where the token came from, as errors say
        self._sleep = sleep
        self._clock = clock
        self._gh: GitHub[Any] | None = None
        self._deadline: Deadline | None = None
        self._methods: Counter[str] = Counter()
        self._bytes_uploaded = 0
        self._hashed: dict[tuple[int, int], str] = {}
        hint = "is the API URL (`api-url` in matrix.yaml, --github-api-url) GitHub's?"
        self._answers = StreamedAnswers(deadline=lambda: self._deadline, who="GitHub", hint=hint)
        # what this client gave up on: a later operation of the same run is not asked again
        # (each would wait through the whole retry policy once more)
        self._gave_up: str | None = None

    def __repr__(self) -> str:
        return (
            f"GithubClient(api_url={self.api_url!r}, token={'<secret>' if self._token else None})"
        )

    @property
    def anonymous(self) -> bool:
        return self._token is None

    @property
    def stats(self) -> RequestStats:
        return RequestStats(by_method=dict(self._methods), bytes_uploaded=self._bytes_uploaded)

    def scrub(self, text: str) -> str:
        return self._token.scrub(text) if self._token else text

    # -- sessions and retries -------------------------------------------------------------

    @contextmanager
    def session(self, where: str, *, done: list[str] | None = None) -> Iterator[None]:
        """One operation on `where` (owner/name@tag): one pool, one deadline, failures
        as PublishError naming what was done before the failure."""
        if self._gh is not None:  # nested: the outer session holds the pool and deadline
            yield
            return
        if self._gave_up is not None:
            raise GithubUnreachable(
                f"GitHub {where}: not asked, this run gave up on GitHub already: {self._gave_up}",
                hint=f"re-running `{self.command}` resumes where this run stopped",
            )
        from githubkit import TokenAuthStrategy, UnauthAuthStrategy

        self._deadline = Deadline(self.policy.total, self._clock)
        auth: Any = TokenAuthStrategy(self._token.reveal()) if self._token else UnauthAuthStrategy()
        self._gh = _github_class()(
            auth,
            base_url=self.api_url,
            auto_retry=False,
            http_cache=False,
            timeout=self.policy.request_timeout,
            user_agent="cuda-wheel-release (githubkit)",
            ssl_verify=tls_context(),
            event_hooks=self._answers.hooks(self._count),
        )
        try:
            with self._gh, self._gh.get_sync_client() as http, self._answers.sockets_of(http):
                yield
        except RetryExhausted as error:
            self._gave_up = self.scrub(str(error))
            progress = "; ".join(done) if done else "nothing was changed"
            raise GithubUnreachable(
                self.scrub(f"GitHub {where}: {error} (done so far: {progress})"),
                hint=f"re-running `{self.command}` resumes where this run stopped",
            ) from None
        except PublishError as error:
            error.message = self.scrub(error.message)
            error.args = (error.message,)
            raise
        finally:
            self._gh = None
            self._deadline = None

    def _count(self, request: httpx.Request) -> None:
        self._methods[request.method] += 1

    def _client(self) -> GitHub[Any]:
        if self._gh is None:
            raise RuntimeError("a GitHub request outside of a session")
        return self._gh

    def rest(self) -> Any:
        return self._client().rest(API_VERSION)

    def retrying(self, what: str, attempt: Callable[[int], T]) -> T:
        """Run `attempt(retry)` until it succeeds, under the policy and the session's
        deadline; an attempt may raise `Reconcile` to be tried again after a wait."""
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
                self.scrub(verdict.reason),
                delay,
                retry,
                self.policy.attempts - 1,
            ),
        )

    def request(
        self, what: str, call: Callable[[], Response[Any]], *, accept: Collection[int] = ()
    ) -> Response[Any]:
        """An idempotent request, retried as it is."""
        return self.retrying(what, lambda retry: self.send(what, call, accept=accept))

    def list_all(self, what: str, list_of: ListOf, repository: str, **params: Any) -> list[Any]:
        """Every item of a paginated list of `repository`'s (`list_of` picks githubkit's
        endpoint) as GitHub's JSON, through githubkit's paginator (it
        follows the `Link: rel="next"` URLs); a transient failure retries the whole list.
        Plain JSON, not githubkit's models: a leftover of a failed upload has an asset state
        (`starter`, `new`) outside the models' `Literal["uploaded", "open"]`, and a release
        listing carries its assets."""
        gh = self._client()
        owner, repo = owner_and_name(repository)
        request = list_of(self.rest().repos)

        def pages() -> list[Any]:
            walk = PageWalk(self.api_url)

            def page(response: Response[Any]) -> list[Any]:
                if problem := walk.step(str(response.url), response.headers.get("link")):
                    raise PublishError(
                        self.scrub(f"cannot {what} at {self.api_url}: {problem}"),
                        hint="check the API URL, or try again later",
                    )
                return json_list(response, what)

            return list(
                gh.rest.paginate(
                    request,
                    map_func=page,
                    owner=owner,
                    repo=repo,
                    per_page=PER_PAGE,
                    **params,
                )
            )

        def attempt(retry: int) -> list[Any]:
            try:
                return self.attempt(what, pages)
            except _Accepted as answer:  # a refusal is explained, as `send` does
                raise self.refusal(what, answer.response) from None

        return self.retrying(what, attempt)

    def send(
        self, what: str, call: Callable[[], Response[Any]], *, accept: Collection[int] = ()
    ) -> Response[Any]:
        """One attempt (see `attempt`); statuses in `accept` come back as answers."""
        try:
            return self.attempt(what, call)
        except _Accepted as answer:
            if answer.response.status_code in accept:
                return answer.response
            raise self.refusal(what, answer.response) from None

    def attempt(self, what: str, call: Callable[[], T]) -> T:
        """One attempt. Transient failures propagate for the retry loop to classify; a
        refusal comes back to `send` (`_Accepted`); every other failure is a PublishError."""
        from githubkit.exception import RequestError, RequestFailed

        try:
            return call()
        except RequestFailed as error:
            if classify(error, self._clock()) is not None:
                raise
            raise _Accepted(error.response) from None
        except RequestError as error:
            if classify(error, self._clock()) is not None:
                raise
            raise PublishError(
                self.scrub(f"cannot {what} at {self.api_url}: {error.exc}"),
                hint=getattr(error.exc, "hint", None)  # AnswerRefused's
                or "check the GitHub API URL (`api-url` in matrix.yaml, --github-api-url) "
                "and the network",
            ) from None

    def refusal(self, what: str, response: Response[Any]) -> PublishError:
        return refusal_of(
            what,
            status=status_of(response),
            message=self.scrub(message_of(response)),
            url=str(response.url),
            api_url=self.api_url,
            token_variable=None if self.anonymous else self.token_variable,
        )

    # -- releases and assets --------------------------------------------------------------

    def find_release(self, repository: str, tag: str) -> ReleaseInfo | None:
        """The release of the tag: the published one by tag (one request), else a draft
        from the release list (drafts are 404 by tag)."""
        owner, repo = owner_and_name(repository)
        rest = self.rest()
        response = self.request(
            f"look up the release {tag}",
            lambda: rest.repos.get_release_by_tag(owner, repo, tag),
            accept=(404,),
        )
        if response.status_code == 200:
            return parse_release(json_of(response, what := f"look up the release {tag}"), what)
        return choose_release(self.list_releases(repository), tag)

    def repository_web(self, repository: str) -> str | None:
        """The web origin of the repository's `html_url` (`<web>/<owner>/<repo>`): where its
        release pages and downloads are; None where the answer has no such URL."""
        from pydantic import ValidationError

        owner, repo = owner_and_name(repository)
        rest = self.rest()
        response = self.request(
            f"read the repository {repository}", lambda: rest.repos.get(owner, repo)
        )
        try:
            html_url: str = response.parsed_data.html_url
        except ValidationError as error:
            raise PublishError(
                f"GitHub answered `read the repository {repository}` with a repository that "
                f"githubkit's model does not read ({error.error_count()} problems, the first: "
                f"{error.errors()[0]['loc']}: {error.errors()[0]['msg']})",
                hint="is the API URL in matrix.yaml a GitHub REST API (api.github.com or "
                "https://HOST/api/v3)?",
            ) from None
        return web_base_of_repository(html_url, repository)

    def list_releases_json(self, repository: str) -> list[Mapping[str, Any]]:
        """Every release as GitHub's JSON (drafts only with push access)."""
        items = self.list_all(
            f"list the releases of {repository}", lambda repos: repos.list_releases, repository
        )
        if not all(isinstance(item, Mapping) for item in items):
            raise PublishError(
                f"GitHub answered `list the releases of {repository}` with items that are not "
                "releases"
            )
        return items

    def list_releases(self, repository: str) -> list[ReleaseInfo]:
        return [
            parse_release(r, f"list the releases of {repository}")
            for r in self.list_releases_json(repository)
        ]

    def published_releases(
        self, repository: str
    ) -> list[tuple[ReleaseInfo, tuple[AssetInfo, ...]]]:
        """Every published release with the assets its listing carries (the listing's own
        `assets`, read as plain JSON: no request per release)."""
        out = []
        for data in self.list_releases_json(repository):
            release = parse_release(data, f"list the releases of {repository}")
            if release.draft:
                continue
            assets = data.get("assets")
            listed = tuple(parse_asset(a) for a in assets) if isinstance(assets, list) else ()
            out.append((release, listed))
        return out

    def get_release(self, repository: str, release_id: int) -> ReleaseInfo:
        owner, repo = owner_and_name(repository)
        rest = self.rest()
        response = self.request(
            f"read the release {release_id}",
            lambda: rest.repos.get_release(owner, repo, release_id),
        )
        return parse_release(json_of(response, what := f"read the release {release_id}"), what)

    def list_assets(self, repository: str, release: ReleaseInfo) -> list[AssetInfo]:
        items = self.list_all(
            f"list the assets of {release.tag}",
            lambda repos: repos.list_release_assets,
            repository,
            release_id=release.id,
        )
        return [parse_asset(item, f"list the assets of {release.tag}") for item in items]

    def create_release(
        self, repository: str, tag: str, *, draft: bool, target_commitish: str | None
    ) -> Response[Any]:
        """One attempt at creating the release; 422 comes back as an answer."""
        from githubkit.utils import UNSET

        owner, repo = owner_and_name(repository)
        rest = self.rest()
        return self.send(
            f"create the release {tag}",
            lambda: rest.repos.create_release(
                owner,
                repo,
                tag_name=tag,
                name=tag,
                draft=draft,
                target_commitish=target_commitish or UNSET,
            ),
            accept=(422,),
        )

    def update_release(self, repository: str, release_id: int, **fields: Any) -> Response[Any]:
        """One attempt at changing a release; 422 comes back as an answer."""
        owner, repo = owner_and_name(repository)
        rest = self.rest()
        return self.send(
            f"update the release {release_id}",
            lambda: rest.repos.update_release(owner, repo, release_id, **fields),
            accept=(422,),
        )

    def delete_asset(self, repository: str, asset: AssetInfo) -> None:
        owner, repo = owner_and_name(repository)
        rest = self.rest()
        self.request(
            f"delete {asset.shown}",
            lambda: rest.repos.delete_release_asset(owner, repo, asset.id),
            accept=(404,),
        )

    def rename_asset(self, repository: str, asset: AssetInfo, name: str) -> Response[Any]:
        """One attempt at renaming an asset; 422 (the name is taken) comes back."""
        owner, repo = owner_and_name(repository)
        rest = self.rest()
        return self.send(
            f"rename {asset.shown} to {one_line(name)}",
            lambda: rest.repos.update_release_asset(owner, repo, asset.id, name=name),
            accept=(422,),
        )

    def upload_asset(self, release: ReleaseInfo, name: str, data: bytes) -> Response[Any]:
        """One attempt at uploading `data` as `name` to the release's `upload_url` (githubkit
        would build the URL from the API base, which is not GitHub's uploads host); bytes,
        never a stream, so that a retry sends them again. 422 comes back as an answer."""
        gh = self._client()
        self._bytes_uploaded += len(data)
        return self.send(
            f"upload {name}",
            lambda: gh.request(
                "POST",
                upload_endpoint(release.upload_url),
                params={"name": name},
                content=data,
                headers={
                    **API_HEADERS,
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(len(data)),
                },
            ),
            accept=(422,),
        )

    def download_asset(self, asset: AssetInfo, *, check: bool = True) -> bytes:
        """An asset's bytes, through the API (drafts included), retried; with `check`, a
        PublishError unless they are the size and digest GitHub lists for it."""
        gh = self._client()
        data = self.retrying(f"download {asset.shown}", lambda retry: self._download(gh, asset))
        if check and (len(data) != asset.size or asset.sha256 not in (None, sha256_of(data))):
            listed = f"{asset.size} bytes, digest {str(asset.sha256)[:12]}"
            raise PublishError(
                f"GitHub served other bytes for {asset.shown} ({listed} listed)",
                hint="its storage serves what the API does not list: re-run, then re-upload it",
            )
        return data

    def _download(self, gh: GitHub[Any], asset: AssetInfo) -> bytes:
        more = AnswerRefused(  # read no further than the size GitHub lists for it
            f"GitHub served more than the {asset.size} bytes it lists for {asset.shown}",
            "its storage serves what the API does not list: re-run, then re-upload it",
        )
        with self._answers.reading(asset.size, more):
            response = self.send(
                f"download {asset.shown}",
                lambda: gh.request(
                    "GET", asset.url, headers={**API_HEADERS, "Accept": "application/octet-stream"}
                ),
            )
        return response.content

    def asset_sha256(self, asset: AssetInfo, *, trust_digest: bool = True) -> str:
        """The sha256 of an asset's bytes: its `digest` where GitHub reports one and it is
        trusted, else the hash of its download (remembered for the asset's id and size)."""
        if trust_digest and asset.sha256 is not None:
            return asset.sha256
        known = self._hashed.get((asset.id, asset.size))
        if known is None:
            known = sha256_of(self.download_asset(asset, check=False))
            self._hashed[(asset.id, asset.size)] = known
        return known

    # -- artifact attestations ------------------------------------------------------------

    def attestations(self, repository: str, sha256: str) -> list[object] | None:
        """The items of GitHub's attestations API for a sha256 (first page of 100), whatever
        each is (one that is no object is refused, never left out); None for none (404)."""
        owner, repo = owner_and_name(repository)
        what, digest = f"list the attestations of sha256:{sha256[:12]}", f"sha256:{sha256}"
        listing = self.rest().repos.list_attestations
        response = self.request(
            what,
            lambda: listing(owner, repo, digest, per_page=ATTESTATIONS_PAGE),
            accept=(404,),
        )
        if response.status_code == 404:
            return None
        return attestation_items(json_of(response, what), f"`{what}` on {repository}")


class _Accepted(Exception):  # not an error: a refusal `send` may accept
    """A request GitHub refused for good (not transient): `send` accepts it or explains it."""

    def __init__(self, response: Response[Any]) -> None:
        super().__init__(response.status_code)
        self.response = response
