"""How one command reaches its destinations: every client and credential it uses, built
from the environment the command hands in, each once, and the command line's overrides of
where a destination is (`--github-api-url`, `--repository-url`, `--index-base-url`).

A command makes one `Reach` and hands it down; the stages and the destination kinds ask it
for a GitHub client (one per API URL for the whole command, so that a GitHub this run gave
up on is not asked again by the next step), for index credentials and for what to mask.
Nothing below a command reads the environment for a client or a credential.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from release.credentials import (
    PYPI_TOKEN_PREFIX,
    IndexCredentials,
    S3Credentials,
    Secret,
    github_token,
    index_credentials,
    is_pypi_token,
    is_pypi_url,
    redact,
    s3_credentials,
    secret_values,
)
from release.errors import ConfigError, PublishError
from release.remote import httpclient
from release.remote.github import GithubClient
from release.remote.github_model import GITHUB_API
from release.remote.httpclient import (
    BasicCredentials,
    Client,
    OriginAuth,
    index_logins,
    origin_or_none,
)
from release.remote.retry import RetryPolicy

if TYPE_CHECKING:
    from release.remote.s3 import Bucket, S3Store

PYPI_UPLOAD = "https://upload.pypi.org/legacy/"
GITHUB_SERVER = "https://github.com"

# an index's upload URL (whose credentials the environment gives) and the URLs it serves
IndexLogin = tuple[str, Sequence[str | None]]


def _check_token(name: str, value: str | None) -> None:
    """ConfigError where the variable `name` holds a token with white space, a control
    character or a letter outside ASCII in it (a secret pasted with its line end, or with
    a typographic quote): no token has one, an HTTP header cannot carry a line break, and
    one outside ASCII would fail at the server in words that do not name the variable.
    A PyPI token (`pypi-...`) too: it goes to PyPI alone, never to GitHub as a bearer."""
    if value and any(c.isspace() or not c.isprintable() or not c.isascii() for c in value):
        raise ConfigError(
            [
                f"{name} holds white space, a line break or a letter outside ASCII,"
                " which no token has"
            ],
            hint=f"set {name} again without them (a secret saved with its line end, say)",
        )
    if value and value.startswith(PYPI_TOKEN_PREFIX):
        raise ConfigError(
            [f"{name} holds a PyPI token (pypi-...), which is sent to PyPI alone, never to GitHub"],
            hint=f"set {name} to a GitHub token",
        )


class Reach:
    """The clients and credentials of one command (see the module doc)."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        command: str,
        github_api_url: str | None = None,
        repository_url: str | None = None,
        index_base_url: str | None = None,
        read_only: bool = False,
        github_policy: RetryPolicy | None = None,
    ) -> None:
        """`read_only`: a plan or a dry run, which reads public destinations anonymously
        where the environment has no token. `github_policy`: the retries and time bound of
        the command's GitHub clients where a caller names none (verify's `--attempts` and
        `--timeout`), else the client's own."""
        self.environ = environ  # the command's environment, for the processes it runs
        self.command = command
        self.github_api_url = github_api_url
        self.repository_url = repository_url
        self.index_base_url = index_base_url
        self.read_only = read_only
        self.github_policy = github_policy
        self.secrets = secret_values(environ)
        for name in ("GITHUB_TOKEN", "GH_TOKEN"):
            _check_token(name, environ.get(name))
        self.github_token: Secret | None = github_token(environ)
        self._github: dict[tuple[str, RetryPolicy | None, str | None], GithubClient] = {}

    def __repr__(self) -> str:
        return f"Reach(command={self.command!r}, github_api_url={self.github_api_url!r})"

    # -- GitHub ---------------------------------------------------------------------------

    def token(self, token_secret: str | None = None) -> Secret | None:
        """The token in the variable `token_secret` names (a destination's `token-secret`),
        else the job's own (GITHUB_TOKEN), if the environment has one."""
        value = self.environ.get(token_secret) if token_secret else None
        if token_secret:
            _check_token(token_secret, value)
        return Secret(value) if value else self.github_token

    def github(
        self,
        api_url: str | None,
        *,
        policy: RetryPolicy | None = None,
        token_secret: str | None = None,
    ) -> GithubClient:
        """The command's client of the GitHub at `api_url` (`--github-api-url` instead, where
        given), with the token of `token_secret` (`token`) if there is one, under `policy`
        (else the command's `github_policy`); made on first use, one per API URL, retry
        policy and token."""
        url = self.github_api_url or api_url or GITHUB_API
        policy = policy or self.github_policy
        key = (url.rstrip("/"), policy, token_secret)
        if key not in self._github:
            self._github[key] = GithubClient(
                api_url=url,
                token=self.token_for(url, token_secret),
                token_variable=self.token_variable(token_secret),
                policy=policy,
                command=self.command,
            )
        return self._github[key]

    def token_variable(self, token_secret: str | None) -> str:
        """The variable `token(token_secret)` reads: `token_secret` where it is set, else
        GITHUB_TOKEN."""
        return token_secret if token_secret and self.environ.get(token_secret) else "GITHUB_TOKEN"

    def token_for(self, url: str, token_secret: str | None = None) -> Secret | None:
        """`token(token_secret)`, to be sent to `url`; PublishError where a workflow job's
        token would go to a GitHub other than the job's own (see `trusted_github`)."""
        token = self.token(token_secret)
        trusted = self.trusted_github()
        if token is None or trusted is None or origin_or_none(url) in trusted:
            return token
        raise PublishError(
            f"{redact(url)} is not this job's GitHub ({', '.join(sorted(trusted))}): "
            f"{self.token_variable(token_secret)} is sent to the job's own GitHub alone",
            hint="a manifest names its GitHub as matrix.yaml did at `release build`; one that "
            "names another was changed since (rebuild it). A destination on another GitHub "
            "is reached with --github-api-url",
        )

    def trusted_github(self) -> frozenset[str] | None:
        """The origins a GitHub token may go to in a workflow job: the runner's own GitHub
        (GITHUB_API_URL, GITHUB_SERVER_URL, which the runner sets and no file of the run
        can change), and `--github-api-url`. None outside a workflow: the caller's files
        are the caller's own. In a job, a manifest is another job's output, written
        beside the project's build (its code), so what it names is not trusted with a
        token."""
        if self.environ.get("GITHUB_ACTIONS") != "true":
            return None
        urls = (
            self.environ.get("GITHUB_API_URL") or GITHUB_API,
            self.environ.get("GITHUB_SERVER_URL") or GITHUB_SERVER,
            self.github_api_url,
        )
        return frozenset(origin for url in urls if url and (origin := origin_or_none(url)))

    def signer_github(self) -> GithubClient:
        """The GitHub a workflow runs on (the signer of a project whose matrix names no
        GitHub destination): `--github-api-url`, else GITHUB_API_URL, else api.github.com."""
        return self.github(self.github_api_url or self.environ.get("GITHUB_API_URL"))

    def require_github_token(self, name: str, token_secret: str | None = None) -> None:
        """PublishError where the destination `name` would be written without its token:
        the variable its `token_secret` names, else GITHUB_TOKEN (a command that only reads
        asks public releases with the job's token or anonymously)."""
        if self.read_only:
            return
        if token_secret and not self.environ.get(token_secret):
            raise PublishError(
                f"{name}: no {token_secret} in the environment (its token-secret)",
                hint=f"export {token_secret} with a token that may write there (a workflow: "
                f"actions/publish's `token: ${{{{ secrets.{token_secret} }}}}` and "
                f"`token-secret: {token_secret}`)",
            )
        if self.github_token is None and not token_secret:
            raise PublishError(
                f"{name}: no GITHUB_TOKEN in the environment",
                hint="export GITHUB_TOKEN (a workflow job: permissions: contents: write)",
            )

    # -- package indexes ------------------------------------------------------------------

    def upload_url(self, configured: str | None) -> str:
        """Where a PyPI destination takes uploads: `--repository-url`, else its own."""
        return self.repository_url or configured or PYPI_UPLOAD

    def index_credentials(self, upload_url: str) -> IndexCredentials | None:
        """The environment's upload credentials for the index at `upload_url`; PublishError
        where they are a PyPI token and `upload_url` is not PyPI's (the token would reach
        another server, which could upload as the project with it)."""
        creds = index_credentials(self.environ, upload_url)
        if creds is not None and is_pypi_token(creds.password) and not is_pypi_url(upload_url):
            raise PublishError(
                f"{creds.source} holds a PyPI token, and the upload URL {redact(upload_url)} "
                "is not PyPI's: a PyPI token is sent to PyPI alone",
                hint="check the manifest's repository_url (`release build` writes matrix.yaml's "
                "there; a manifest changed since is not to be trusted) and --repository-url; "
                "another index takes its own credentials (TWINE_USERNAME, TWINE_PASSWORD)",
            )
        return creds

    def index_logins(self, indexes: Iterable[IndexLogin]) -> dict[str, BasicCredentials]:
        """The basic credentials of each index, by the origins it serves."""
        return index_logins(self.environ, indexes)

    def origin_auth(
        self, *, bearer: Iterable[str] = (), indexes: Iterable[IndexLogin] = ()
    ) -> OriginAuth:
        """The GitHub token for the origins `bearer` (where the environment has one), and
        the index credentials for the origins each index serves, sent only when asked."""
        token = self.github_token
        trusted = self.trusted_github()
        tokens = {
            origin: token
            for origin in bearer
            if token and (trusted is None or origin.lower() in trusted)
        }
        logins = list(indexes)
        return OriginAuth(bearer=tokens, basic=self.index_logins(logins) if logins else {})

    # -- S3-compatible storage (the nightly channel) ---------------------------------------

    @cached_property
    def s3_keys(self) -> S3Credentials | None:
        """The environment's keys of S3-compatible storage, read where a command asks."""
        return s3_credentials(self.environ)

    def s3(self, bucket: Bucket) -> S3Store:
        """A client of `bucket` with the environment's keys (anonymous without: reads)."""
        from release.remote.s3 import S3Store  # noqa: PLC0415  # boto3: the nightly channel only

        return S3Store(bucket, self.s3_keys)

    # -- HTTP -----------------------------------------------------------------------------

    def http(self, auth: OriginAuth | None = None, *, concurrency: int = 16) -> Client:
        """A new HTTP client with `auth` (the caller closes it)."""
        return httpclient.client(auth=auth, concurrency=concurrency)


def merged(auths: Iterable[OriginAuth]) -> OriginAuth:
    """One OriginAuth of several (a later one's origin wins)."""
    bearer: dict[str, Secret] = {}
    basic: dict[str, BasicCredentials] = {}
    for auth in auths:
        bearer.update(auth.bearer)
        basic.update(auth.basic)
    return OriginAuth(bearer=bearer, basic=basic)
