"""What `release init` refuses to write, and why: the text of a value that the YAML emitter
could carry but that a workflow or a matrix must not (release.init.emit carries the rest
exactly). Each check returns the problem in words, or None; the caller names the option or
the file and line the value came from. Pure.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from release.credentials import has_credentials, is_credential_query_key, url_shape_problem
from release.yamlspec import scalar_problem, unshown_character

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
    """Why `text` cannot be matrix.yaml's torch-index: what the matrix's loader refuses
    there (release.credentials.url_shape_problem: an http(s) URL, its scheme in lower case,
    of a host and port a parser reads; a scalar yamlspec.scalar_problem takes), a character
    no URL holds, or a credential: userinfo, a query or fragment key that names one (`?`,
    `&`, `;` or `#` before it), or anything else `redact` would mask, so that what is
    written is what was given. Never says the URL itself: it may hold the credential."""
    if any(char.isspace() for char in text):
        return "the URL holds whitespace"
    unwritable = unwritable_characters(text)
    if unwritable is not None:
        return f"the URL holds {unwritable}"
    if problem := scalar_problem(text):
        return f"matrix.yaml cannot hold it: {problem}"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError:  # its message repeats the URL's parts: a password's, where # cut it
        return "not a URL: its host or port cannot be read"
    if url_shape_problem(text):  # the scheme, the host, port 0
        return "not an http(s) URL of a host (the scheme http:// or https://, in lower case)"
    if "@" in parts.netloc:
        return (
            "the URL holds credentials (user:password@), which matrix.yaml would hold too: "
            + CREDENTIAL_REMEDY
        )
    named = [key for key in _parameter_keys(text) if _credential_key(key)]
    if named:
        return (
            f"the URL's query key {named[0]!r} carries a credential, which matrix.yaml would "
            f"hold too: {CREDENTIAL_REMEDY}"
        )
    if has_credentials(text):
        return f"the URL holds a credential, which matrix.yaml would hold too: {CREDENTIAL_REMEDY}"
    return None


def _parameter_keys(url: str) -> list[str]:
    """The key of every `key=value` or bare `key` parameter after the URL's `?` or `#`,
    whichever of `&`, `;`, `?` and `#` parts it."""
    tail = url[min(i for i in (url.find("?"), url.find("#"), len(url)) if i >= 0) :]
    return [part.split("=", 1)[0] for part in re.split(r"[?#&;]", tail) if part]


def _credential_key(key: str) -> bool:
    """A key redact masks the value of, or one that holds a credential's word."""
    return is_credential_query_key(key) or any(part in key.lower() for part in CREDENTIAL_KEY_PARTS)


def env_value_problem(value: str) -> str | None:
    """Why `value` cannot be a build.env value: an environment variable holds no NUL, and
    matrix.yaml no line break, other control character or value its loader refuses."""
    if "\0" in value:
        return "it holds a NUL character, which no environment variable can"
    if found := unshown_character(value):
        return f"it holds the control character {found}, which matrix.yaml refuses in a value"
    if problem := scalar_problem(value):
        return f"matrix.yaml refuses {problem}"
    return None


# What the build's own processes read (the shell, the dynamic loader, Python, the compilers,
# pip, the CI runner): a build.env value replaces it for the whole build.
PROCESS_VARIABLES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR", "TMP", "TEMP"),
        *("LANG", "LANGUAGE", "TERM", "IFS", "ENV", "BASH_ENV", "CDPATH", "TZ"),
        *("CC", "CXX", "CPP", "LD", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS"),
        *("CUDA_PATH", "CUDA_ROOT", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN"),
        *("VIRTUAL_ENV", "CONDA_PREFIX", "SSL_CERT_FILE", "SSL_CERT_DIR", "CI"),
        *("REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"),
    }
)
PROCESS_PREFIXES = (
    *("LD_", "DYLD_", "PYTHON", "PIP_", "UV_", "LC_"),
    *("GITHUB_", "RUNNER_", "ACTIONS_"),
)


def process_variable_problem(name: str) -> str | None:
    """Why a setup.py switch named `name` is not set in build.env: the build's own
    processes read that variable (a value for the switch would replace it for all of
    them), or None."""
    upper = name.upper()
    if upper in PROCESS_VARIABLES or upper.startswith(PROCESS_PREFIXES):
        return (
            f"{name} is read by the build's own processes (the shell, the dynamic loader, "
            "Python, the compilers, pip or the CI runner): a value set for the switch would "
            "replace it for the whole build"
        )
    return None
