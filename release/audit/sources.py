"""What `release audit` reads: index pages (a project's page, or a root index whose
projects it reads) and wheel URLs, from its arguments and a `--urls FILE` of one URL a line.

A URL whose path ends in `.whl` is a wheel (its `#sha256=` fragment, where it has one, is
the hash a consumer pins); any other is an index page. A line that is not an http(s) URL
is refused with its file:line before anything is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urldefrag, urlsplit

from release.credentials import redact
from release.errors import ConfigError, FileError, shown

MAX_URLS_FILE = 16 * 2**20  # a --urls file of more is not a list someone keeps by hand
MAX_URL = 8192  # longer than any server takes (httpx itself refuses 65,536)


@dataclass(frozen=True, kw_only=True)
class Source:
    url: str  # without its fragment
    kind: Literal["page", "wheel"]
    sha256: str | None = None  # a wheel URL's #sha256= fragment
    given: str  # where it was given: "argument 2", "urls.txt:3"

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


def has_userinfo(url: str) -> bool:
    """Whether `url` names a user or password (`https://user:password@host/`), which audit
    never sends; a URL too broken to split has none to send."""
    try:
        parts = urlsplit(url)
        return parts.username is not None or parts.password is not None
    except ValueError:
        return False


PAGE_FILES = (".html", ".htm", ".json")


def source(text: str, given: str) -> Source | str:
    """The source `text` names, or why it names none."""
    odd = any(c.isspace() or not c.isprintable() for c in text.strip())
    if odd and "@" in text:  # not repeated: no mask finds where a password with a space ends
        return f"{given}: a URL holds no white space or control character (write a space as %20)"
    try:
        url, fragment = urldefrag(text.strip())
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError as error:  # an unclosed [IPv6 host, a port out of range
        # urllib quotes the port it could not read (`... as 'x'`): a password a # cut short
        reason = str(error).partition(" as ")[0]
        return f"{given}: {shown(text.strip())} is not a URL ({redact(reason)})"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{given}: {shown(text.strip())} is not an http(s) URL"
    if odd:
        return f"{given}: {shown(text.strip())} holds white space or a control character"
    if len(url) > MAX_URL:
        return f"{given}: a URL of {len(url)} characters, over the {MAX_URL} one may have"
    if has_userinfo(url):  # the URL is not repeated
        return f"{given}: a URL with credentials in it; release audit sends none"
    if parts.path.endswith(".whl"):
        sha256 = fragment[len("sha256=") :].lower() if fragment.startswith("sha256=") else None
        return Source(url=url, kind="wheel", sha256=sha256, given=given)
    # a directory's URL gets its `/` (PEP 503); a file's (a static host's index.html) is kept
    named_file = parts.path.rsplit("/", 1)[-1].endswith(PAGE_FILES)
    page = url if parts.path.endswith("/") or parts.query or named_file else url + "/"
    return Source(url=page, kind="page", given=given)


def sources(urls: Sequence[str], urls_file: Path | None) -> list[Source]:
    """The arguments, then the lines of `urls_file` (blank lines and `#` comments skipped);
    ConfigError naming every one that is not a URL, or where none is given."""
    lines = [(text, f"argument {n}") for n, text in enumerate(urls, 1)]
    if urls_file is not None:
        try:
            # read, not stat'd: a pipe or /dev/zero has no size, and would never end
            with urls_file.open("rb") as stream:
                data = stream.read(MAX_URLS_FILE + 1)
            if len(data) > MAX_URLS_FILE:
                raise ConfigError([f"--urls {urls_file}: over {MAX_URLS_FILE // 2**20} MiB"])
            text = data.decode("utf-8")
        except OSError as error:
            raise FileError.of(error, "read --urls") from None
        except UnicodeDecodeError:
            raise ConfigError([f"--urls {urls_file}: not UTF-8 text"]) from None
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append((line, f"{urls_file}:{number}"))
    found: dict[str, Source] = {}  # a URL given twice is read once
    problems: list[str] = []
    for text, given in lines:
        one = source(text, given)
        if isinstance(one, str):
            problems.append(one)
        else:
            found.setdefault(one.url, one)
    if problems:
        raise ConfigError(problems, hint="give index page URLs and wheel URLs (http or https)")
    if not found:
        raise ConfigError(
            ["nothing to audit"], hint="give an index or wheel URL, or --urls FILE (one a line)"
        )
    return list(found.values())
