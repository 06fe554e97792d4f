"""The one list of secrets: which values must never be shown, and how they are hidden.

Every message, log line, report and exception text that can carry a value from the
environment or a server goes through `mask`; the console, the error printer and the
subprocess runner apply it to everything they show or write, whatever the caller did. A
secret is the value of a variable named in SECRET_VARIABLES or whose name says it is one
(`*TOKEN*`, `*PASSWORD*`, `*SECRET*`, `*API_KEY*`, `*CREDENTIAL*`, or a word `PAT` between
underscores: `GH_PAT_X`; in any case), and the credentials any URL in a text carries
(`redact`): its userinfo (`user:pass@`, `token@`) and the values of its query keys that
name a credential (`token`, `access_token`, `key`, `api_key`, `secret`, `password`,
`passwd`, `passphrase`, `pwd`, `auth`, `jwt`, `sig`, `signature`, `X-Amz-Signature`,
`X-Amz-Credential`, ..., in any case). The same names are kept out of
every child process that needs no credentials of ours, and refused in matrix.yaml's build
`env`. On GitHub Actions `add_mask_lines` asks the runner to hide the same values in the log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

MASK = "***"
CUT = "..."  # what ends a value shown cut short
MIN_LENGTH = 4  # shorter values would mask ordinary text
SECRET_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "TWINE_PASSWORD",
    "TWINE_API_KEY",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "AWS_ACCESS_KEY_ID",  # S3 keys: the compile cache's (sccache's) and the nightly channel's
)
SECRET_NAME_PARTS = ("TOKEN", "PASSWORD", "SECRET", "API_KEY", "CREDENTIAL")
# a word of a name between underscores: a personal access token (GH_PAT_FOR_WHL_RELEASE,
# sgl-project's), never PATH or PATCH
SECRET_NAME_WORDS = ("PAT",)
# Variables no child process needs: the credentials of this program, and files that
# would hand credentials to every server a child talks to.
CREDENTIAL_VARIABLES = (*SECRET_VARIABLES, "TWINE_USERNAME", "NETRC")
# A URL's userinfo: after `://`, everything up to the authority's last `@` (a password may
# hold one); the authority ends at `/` or white space. A `?` or `#` before the `@` does not
# end it either (`http://u:p#ss@h` is a password urllib cannot parse, and an error shows it
# whole), nor does a quote, `<`, `>` or `\` (urllib reads `https://u:p'q@h` as the password
# `p'q`): a URL in a text may lose a little more than its userinfo, but no password is shown
# in part.
_USERINFO = re.compile(r"(?<=://)[^/\s]*@")
# A password with a raw `/` (`https://u:pa/ss@h`): urllib ends the authority at the `/` and
# cannot parse the URL, and the error about it would show the password's first part. Where
# the authority holds a `:` and an `@` follows before white space or a quote, everything up
# to that `@` is masked (a port and an `@` in the path lose the host: `h:8080/x@y`).
_SLASHED_USERINFO = re.compile(r"(?<=://)[^/\s@]*:[^\s\"'<>]*@")
# `user:password@host` where no `://` leads to it (a mistyped `http//u:p@h`, `http:/u:p@h`)
_BARE_USERINFO = re.compile(r"(?<![\w.~%+-])[\w.~%+-]+:[^\s/?#@]+@(?=[\w\[])")
# A query parameter anywhere in a text: `?key=value`, `&key=value` (`;` too, as `&amp;`),
# and a fragment's (`#token=value`: never sent, but written and shown with the URL).
_QUERY_PARAMETER = re.compile(
    r"(?P<lead>[?&;#](?P<key>[A-Za-z0-9_.%~+-]+)=)(?P<value>[^&;#\s'\"<>]+)"
)
# Query keys whose values are credentials: these whole keys, and any key holding one of the
# parts (compared upper-case, `-` read as `_`: `X-Amz-Signature`, `AWSAccessKeyId`).
CREDENTIAL_QUERY_KEYS = frozenset(
    {"KEY", "SIG", "AUTH", "AUTHORIZATION", "PW", "PWD", "PASS", "PASSWD", "CODE", "SESSION"}
)
CREDENTIAL_QUERY_PARTS = (
    *("TOKEN", "PASSWORD", "PASSWD", "SECRET", "API_KEY", "APIKEY", "ACCESS_KEY", "ACCESSKEY"),
    *("CREDENTIAL", "SIGNATURE", "PRIVATE_KEY", "PASSPHRASE", "JWT", "BEARER", "HMAC"),
)


def is_secret_name(name: str) -> bool:
    """Whether the variable `name` holds a secret: the one policy of this project."""
    upper = name.upper()
    return (
        upper in SECRET_VARIABLES
        or any(part in upper for part in SECRET_NAME_PARTS)
        or any(word in SECRET_NAME_WORDS for word in upper.split("_"))
    )


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values in `env` that must never be shown, longest first."""
    found = {
        shown
        for name, value in env.items()
        if is_secret_name(name)
        # the value, and each line of it without its white space: a message may quote a
        # token with a line break (`b'token ghp_...\\n'`) or a line of it
        for piece in (value, *(line.strip() for line in value.splitlines()))
        # and as a message quotes it: repr's and JSON's escapes (`pa\\ss` for `pa\ss`)
        for shown in (piece, repr(piece)[1:-1], json.dumps(piece)[1:-1])
        if len(shown) >= MIN_LENGTH
    }
    return tuple(sorted(found, key=len, reverse=True))


def is_credential_query_key(key: str) -> bool:
    """Whether a URL's query parameter `key` carries a credential (see the module doc)."""
    name = unquote(key).upper().replace("-", "_")
    return name in CREDENTIAL_QUERY_KEYS or any(part in name for part in CREDENTIAL_QUERY_PARTS)


def _masked_parameter(match: re.Match[str]) -> str:
    if is_credential_query_key(match["key"]):
        return match["lead"] + MASK
    return match[0]


# Tokens by the prefix their issuer gives them (GitHub's classic and fine-grained, PyPI's
# macaroons, GitLab's): a value so shaped is a credential wherever it stands.
_TOKEN_SHAPED = re.compile(r"\b(?:gh[pousr]_|github_pat_|pypi-AgE|glpat-)[A-Za-z0-9_-]{20,}")
# a run of letters and digits of both cases, as long as a token and with no word's shape
# (no `_`: a name of words joined by it, `Release_Wheels_Token_For_Org_2024`, is a name)
_RANDOM_RUN = re.compile(r"[A-Za-z0-9+/=-]{32,}")


def looks_like_token(text: str) -> bool:
    """Whether `text` is a credential itself (a prefix a token's issuer gives it, or a long
    run of random-looking letters and digits) rather than the name of one."""
    if _TOKEN_SHAPED.search(text):
        return True
    return any(
        any(c.islower() for c in run) and any(c.isupper() for c in run)
        and any(c.isdigit() for c in run)
        for run in _RANDOM_RUN.findall(text)
    )  # fmt: skip


# the literals without which no token of a known issuer's prefix is there: a text of
# megabytes (a compiler's output) that holds none is not scanned for one
_TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "pypi-AgE", "glpat-")
# _BARE_USERINFO from its `:` on: searched for first, since a pattern that starts with a
# run of word characters is tried at every character of the text (a second a megabyte)
_BARE_USERINFO_TAIL = re.compile(r":[^\s/?#@]+@(?=[\w\[])")


def _is_username_character(character: str) -> bool:
    return character.isalnum() or character in "_.~%+-"  # _BARE_USERINFO's [\w.~%+-]


def _mask_bare_userinfo(text: str) -> str:
    """`_BARE_USERINFO.sub(MASK + "@", text)`, found from each `:` back to the start of the
    run of user name characters before it (a match ends in `@`, which is none)."""
    pieces: list[str] = []
    done = searched = 0
    while (tail := _BARE_USERINFO_TAIL.search(text, searched)) is not None:
        start = tail.start()
        while start > 0 and _is_username_character(text[start - 1]):
            start -= 1
        if start == tail.start():  # no user name before the `:`
            searched = start + 1
            continue
        pieces += (text[done:start], MASK + "@")
        done = searched = tail.end()
    return "".join(pieces) + text[done:] if pieces else text


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***: the userinfo
    (`https://***@host/`) and the values of credential query keys (`?token=***`). A URL
    nested in another's query (an S3 `endpoint=`) is redacted too, and so is a token of a
    known issuer's prefix (`ghp_...`) wherever it stands."""
    if any(prefix in text for prefix in _TOKEN_PREFIXES):
        text = _TOKEN_SHAPED.sub(MASK, text)
    if "://" in text:
        text = _SLASHED_USERINFO.sub(MASK + "@", _USERINFO.sub(MASK + "@", text))
    if "@" in text:
        text = _mask_bare_userinfo(text)
    if "=" in text:
        text = _QUERY_PARAMETER.sub(_masked_parameter, text)
    return text


def spaced_or_unprintable(text: str) -> bool:
    """Whether `text` holds white space or a control character: in a URL, a newline would
    add a line of its own to a file it is written into, and urlsplit drops some of them."""
    return any(c.isspace() or not c.isprintable() for c in text)


def url_shape_problem(url: object) -> str | None:
    """Why `url` is not an http(s) URL free of white space and control characters, whose
    host and port a URL parser reads, or None: every URL the tool is given, as an option or
    in matrix.yaml, is held to it."""
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return "is not an http(s) URL"
    if spaced_or_unprintable(url):
        return "holds white space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError:  # its message would repeat the URL's parts, unredacted
        return "is not a URL: its host or port cannot be read"
    if not parts.hostname:
        return "names no host"
    if parts.port == 0:
        return "names port 0, where no server listens"
    return None


# where pip reads a link's hash: the first `[#&]NAME=` anywhere in it, query included
# (pip/_internal/models/link.py, LinkHash._hash_url_fragment_re)
_PIP_HASH = re.compile(r"[#&](sha1|sha224|sha256|sha384|sha512|md5)=")


def written_url_problem(url: object) -> str | None:
    """Why `url` cannot be written into a file a user installs from (a pin, a requirement
    line), or None: `url_shape_problem` (a newline would add a line of its own:
    `--index-url https://evil/`), credentials (the file is shared, and this program never
    writes one), a hash pip would read from it (`?x&sha256=...&`: pip checks the first
    `[#&]sha256=` of a link, so a pin's own `#sha256=` after it would not count), or a
    fragment (where the pin's `#sha256=` goes)."""
    problem = url_shape_problem(url)
    if problem is not None or not isinstance(url, str):
        return problem
    if has_credentials(url):
        return "holds credentials, which no file written may hold"
    if found := _PIP_HASH.search(url):
        return f"names a hash pip would check instead of the pin's ({found.group()})"
    if "#" in url:
        return "holds a fragment (#...), where a pin's own #sha256= goes"
    return None


def has_credentials(url: str) -> bool:
    """Whether `url` carries a credential that `redact` would hide."""
    return redact(url) != url


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced by ***, in any case (a server that echoes a
    password may lower-case it: a charset, a header it folds), and every URL in it
    redacted."""
    secrets = sorted({s for s in secrets if len(s) >= MIN_LENGTH}, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, MASK)
        if secret.lower() in text.lower() or secret.upper() in text.upper():
            text = re.sub(re.escape(secret), MASK, text, flags=re.IGNORECASE)
    return redact(_cut_secrets_masked(text, secrets))


def _cut_secrets_masked(text: str, secrets: Iterable[str]) -> str:
    """`text` with the beginning of a secret that a value cut short ends in masked: a
    message shows a long value as its first characters and `...` (release.errors.shown),
    which may stop inside a secret, where its whole value no longer matches."""
    if CUT not in text:
        return text
    pieces = text.split(CUT)
    for index, piece in enumerate(pieces[:-1]):
        for secret in secrets:
            length = next(
                (
                    n
                    for n in range(len(secret) - 1, MIN_LENGTH - 1, -1)
                    if piece.endswith(secret[:n])
                ),
                0,
            )
            if length:
                pieces[index] = piece[:-length] + MASK
                break
    return CUT.join(pieces)


def without_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a child process that needs no credentials of ours (a build, a probe)."""
    return {k: v for k, v in env.items() if k not in CREDENTIAL_VARIABLES and not is_secret_name(k)}


def isolated_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a package installer that must see only the index it is given: no
    credentials and no PIP_* / UV_* / TWINE_* settings of the user's."""
    return {
        k: v
        for k, v in without_credentials(env).items()
        if not k.startswith(("PIP_", "TWINE_", "UV_"))
    }


def add_mask_lines(env: Mapping[str, str]) -> list[str]:
    """`::add-mask::` workflow commands for every secret value (GitHub Actions only)."""
    if env.get("GITHUB_ACTIONS") != "true":
        return []
    return [f"::add-mask::{value}" for value in secret_values(env) if "\n" not in value]


class Secret:
    """A credential that cannot be printed by accident: repr and str show no value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return mask(text, (self._value,))

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


# --- Credentials, read from the environment in one place. ---

TOKEN_USERNAME = "__token__"  # noqa: S105  # PyPI's fixed username for API tokens


def github_token(env: Mapping[str, str]) -> Secret | None:
    """GITHUB_TOKEN (or GH_TOKEN), if set."""
    value = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN")
    return Secret(value) if value else None


@dataclass(frozen=True, kw_only=True)
class IndexCredentials:
    """How uploads to a package index authenticate, described without the secret."""

    username: str
    password: Secret | None  # None: trusted publishing (twine mints a short-lived token)
    source: str  # for the user: "TWINE_API_KEY", "trusted publishing", ...


def index_credentials(env: Mapping[str, str], repository_url: str) -> IndexCredentials | None:
    """Upload credentials from the environment, or None when there are none."""
    if env.get("TWINE_API_KEY"):
        return IndexCredentials(
            username=TOKEN_USERNAME, password=Secret(env["TWINE_API_KEY"]), source="TWINE_API_KEY"
        )
    if env.get("TWINE_PASSWORD"):
        return IndexCredentials(
            username=env.get("TWINE_USERNAME") or TOKEN_USERNAME,
            password=Secret(env["TWINE_PASSWORD"]),
            source="TWINE_USERNAME/TWINE_PASSWORD",
        )
    in_actions = env.get("GITHUB_ACTIONS") == "true"
    if in_actions and env.get("ACTIONS_ID_TOKEN_REQUEST_URL") and is_pypi_url(repository_url):
        return IndexCredentials(username=TOKEN_USERNAME, password=None, source="trusted publishing")
    return None


# The hosts of PyPI and TestPyPI, exactly: a PyPI token and a trusted publisher's OIDC
# token are good there alone (twine asks the upload URL's host for the OIDC audience), so
# they are sent to no other host, whatever a manifest names (`evilpypi.org` is another).
PYPI_HOSTS = frozenset({"pypi.org", "upload.pypi.org", "test.pypi.org"})
# every API token PyPI or TestPyPI issues (a macaroon) starts so
PYPI_TOKEN_PREFIX = "pypi-"  # noqa: S105  # a prefix, not a password


def is_pypi_url(url: str) -> bool:
    """Whether `url` is an https URL of PyPI's or TestPyPI's own hosts."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme == "https" and host is not None and host in PYPI_HOSTS


def is_pypi_token(secret: Secret | None) -> bool:
    """Whether `secret` is an API token PyPI issued (good at PyPI alone)."""
    return secret is not None and secret.reveal().startswith(PYPI_TOKEN_PREFIX)


@dataclass(frozen=True, kw_only=True)
class S3Credentials:
    """The keys of an S3-compatible store (AWS S3, Cloudflare R2, MinIO)."""

    access_key: Secret
    secret_key: Secret
    session_token: Secret | None = None

    def values(self) -> tuple[str, ...]:
        found = (self.access_key, self.secret_key, self.session_token)
        return tuple(s.reveal() for s in found if s)


def s3_credentials(env: Mapping[str, str]) -> S3Credentials | None:
    """AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN where set), or None
    when either is missing: the environment is the only place keys are read from."""
    access, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        return None
    token = env.get("AWS_SESSION_TOKEN")
    return S3Credentials(
        access_key=Secret(access),
        secret_key=Secret(secret),
        session_token=Secret(token) if token else None,
    )
