"""What `release init` refuses to write, and why: the text of a value that the YAML emitter
could carry but that a workflow or a matrix must not (release.init.emit carries the rest
exactly). Each check returns the problem in words, or None; the caller names the option or
the file and line the value came from. Pure.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import parse_qsl, urlsplit

from release.yamlspec import unshown_character

EXPRESSION = "${{"  # what GitHub Actions evaluates wherever a workflow's string holds it
# Query keys that carry a credential (a token, an API key, a signed URL's signature).
CREDENTIAL_KEY_PARTS = ("token", "key", "secret", "password", "passwd", "auth", "sig", "credential")
CREDENTIAL_REMEDY = "put the credential in the environment (PIP_INDEX_URL / netrc) instead"


def unwritable_characters(text: str) -> str | None:
    """The kind of the first character no value init writes may hold: a line break, a
    control or format character, or a byte that is not UTF-8 (a file name's)."""
    for char in text:
        category = unicodedata.category(char)
        if char in "\n\r\x85" or category in ("Zl", "Zp"):
            return "a line break"
        if category == "Cs":
            return "a byte that is not UTF-8"
        if category in ("Cc", "Cf"):
            return f"the control character U+{ord(char):04X}"
    return None


def workflow_text_problem(text: str) -> str | None:
    """Why `text` (a path) cannot be a string of .github/workflows/release.yml."""
    if EXPRESSION in text:
        return f"it holds {EXPRESSION}, which GitHub Actions would evaluate as an expression"
    unwritable = unwritable_characters(text)
    return f"it holds {unwritable}" if unwritable is not None else None


def index_url_problem(text: str) -> str | None:
    """Why `text` cannot be matrix.yaml's torch-index: not an http(s) URL of a host, a
    character no URL holds, or a credential (userinfo, or a query key that names one). Never
    says the URL itself: it may hold the credential."""
    if any(char.isspace() for char in text):
        return "the URL holds whitespace"
    unwritable = unwritable_characters(text)
    if unwritable is not None:
        return f"the URL holds {unwritable}"
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as error:
        return f"not a URL ({error})"
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return "not an http(s) URL of a host"
    if "@" in parts.netloc:
        return (
            "the URL holds credentials (user:password@), which matrix.yaml would hold too: "
            + CREDENTIAL_REMEDY
        )
    keys = [key for key, _ in parse_qsl(parts.query, keep_blank_values=True)]
    named = [key for key in keys if any(part in key.lower() for part in CREDENTIAL_KEY_PARTS)]
    if named:
        return (
            f"the URL's query key {named[0]!r} carries a credential, which matrix.yaml would "
            f"hold too: {CREDENTIAL_REMEDY}"
        )
    return None


def env_value_problem(value: str) -> str | None:
    """Why `value` cannot be a build.env value: an environment variable holds no NUL, and
    matrix.yaml no line break or other control character."""
    if "\0" in value:
        return "it holds a NUL character, which no environment variable can"
    if found := unshown_character(value):
        return f"it holds the control character {found}, which matrix.yaml refuses in a value"
    return None
