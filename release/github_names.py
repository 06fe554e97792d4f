"""What this program takes from outside as a GitHub address: a repository's OWNER/NAME and
a REST API's base URL, checked by one rule each wherever they come in (an option, the
environment, matrix.yaml) before any request is built from them.

Pure: each `*_problem` says why a value is refused, or None.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from release.credentials import has_credentials, spaced_or_unprintable

# GitHub's rules: an owner is 1-39 letters, digits and single inner hyphens; a repository
# name is 1-100 of letters, digits, '.', '_' and '-', and neither '.' nor '..'. fullmatch,
# not `$`, which would let a trailing newline through.
_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
# a host as a URL names it: a DNS name or IPv4 address, or an IPv6 address in brackets
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")
_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def repository_problem(repository: str) -> str | None:
    """Why `repository` is not a GitHub `owner/name`, with the rule it breaks; or None."""
    owner, slash, name = repository.partition("/")
    if not slash or "/" in name:
        return "write owner/name"
    if not _OWNER.fullmatch(owner):
        return "the owner is 1-39 letters, digits or single inner hyphens"
    if not _NAME.fullmatch(name) or name in (".", ".."):
        return "the name is 1-100 letters, digits, '.', '_' or '-', and not '.' or '..'"
    if name.lower().endswith(".git"):
        return "the name without .git (GitHub names no repository so: write owner/name)"
    return None


def api_url_problem(url: str) -> str | None:
    """Why `url` is not the base URL of a GitHub REST API (`https://api.github.com`, a
    GitHub Enterprise `https://HOST/api/v3`): an http(s) URL of a host, with no credentials
    (the token comes from GITHUB_TOKEN), no query and no fragment; or None."""
    if has_credentials(url):
        return "it holds credentials: give the token in GITHUB_TOKEN instead"
    if spaced_or_unprintable(url):
        return "white space or control characters in it"  # urlsplit would drop some
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not one
    except ValueError:
        return "not a URL"
    if parts.scheme not in ("http", "https"):
        return "not an http(s) URL"
    host = parts.netloc.rpartition(":")[0] if parts.port is not None else parts.netloc
    if not host or not _HOST.fullmatch(host):
        return "no host name in it"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "a base URL has no query and no fragment"
    if not _PATH.fullmatch(parts.path):
        return "its path holds characters a URL cannot"
    return None
