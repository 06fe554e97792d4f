"""Reading a project page of any PEP 503 (HTML) / PEP 691 (JSON) simple index: PyPI,
pypiserver, the index this tool writes, and the projects a root page lists. Pure: pages in,
`ListedFile`s (or names) out; fetching them is release.remote.httpclient's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.message import Message
from html.parser import HTMLParser
from typing import NamedTuple
from urllib.parse import urldefrag, urljoin

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from release.fsutil import UnreadableDocument, json_document
from release.wheelfile import NotAWheel, WheelName

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
SIMPLE_HTML = "application/vnd.pypi.simple.v1+html"
# Ask for PEP 691 JSON first; plain HTML (pypiserver, static hosting) is the fallback.
ACCEPT = f"{SIMPLE_JSON}, {SIMPLE_HTML};q=0.2, text/html;q=0.1"


@dataclass(frozen=True, kw_only=True)
class ListedFile:
    """A file on a simple index page, with what PEP 503/658/691 say about it."""

    name: str
    url: str  # without the fragment
    sha256: str | None
    size: int | None
    hash_name: str | None  # the hash the link carries (sha256, md5, ...), if any
    requires_python: str | None
    metadata_sha256: str | None
    provenance_url: str | None = None  # PEP 740
    yanked: bool = False  # PEP 592: installers skip it unless pinned to it
    digest: str | None = None  # the value of the `hash_name` hash (sha256's is `sha256`)


# of distribution files on one project page: past any project's (PyPI's torch page lists
# about 1,500), so that a page of a million links to one wheel is refused, not held
MAX_PAGE_FILES = 50_000
# of values on a PEP 691 project page, counted before it is decoded (a `,` in a string counts
# too): PyPI's JSON gives a file about twenty (its hashes, core-metadata, size, upload-time,
# a requires-python of several clauses ...); a page of 780,000 files of two took 530 MB to
# decode before its files could be counted, one just under this bound takes 310 MB
MAX_PAGE_VALUES = 40 * MAX_PAGE_FILES
# of links on any page: PyPI's root page links about 700,000 projects (3.9 million links in
# 64 MiB took 880 MB to hold)
MAX_PAGE_LINKS = 1_000_000
MAX_ROOT_VALUES = 4 * MAX_PAGE_LINKS  # a root page's project: `{"name": ..., "_last-serial": N}`
# of characters in one start tag: a real link is under 1,000 (a URL, its hash, PEP 658 and
# 740 attributes), one whose URL is past httpx's 65,536 is that file's finding; the parser's
# scan of a tag and its list of the tag's attributes, made before any handler sees it, take
# hundreds of bytes an attribute (one <div> of 15 million took 12 GB)
MAX_TAG = 128 * 2**10


class _Link(NamedTuple):
    """An `<a>` of a page: its text and the attributes a simple index gives a link."""

    text: str
    href: str | None
    core_metadata: str | None  # data-core-metadata, or PEP 658's first data-dist-info-metadata
    requires_python: str | None
    provenance: str | None
    yanked: bool

    @classmethod
    def of(cls, attrs: dict[str, str | None], text: str) -> _Link:
        core = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        return cls(
            text=text, href=attrs.get("href"), core_metadata=core,
            requires_python=attrs.get("data-requires-python"),
            provenance=attrs.get("data-provenance"), yanked="data-yanked" in attrs,
        )  # fmt: skip


class _Refused(Exception):
    """A page the parser reads no further (its `str()` says why)."""


class _AnchorParser(HTMLParser):
    """The `<a>` elements of a page, within a page's bounds (MAX_PAGE_LINKS, MAX_TAG, and
    `files_at_most` files where given): past them, `_Refused`."""

    def __init__(self, files_at_most: int | None = None) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[_Link] = []
        self._files_at_most = files_at_most
        self._files = 0
        self._links = 0
        self._window = (0, "")  # where in the page, and a copy of the page from there
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []
        self.base: str | None = None  # a <base href>: what every relative link is read against
        self.version: str | None = None  # PEP 629's <meta name="pypi:repository-version">

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        if tag == "meta" and dict(attrs).get("name") == "pypi:repository-version":
            self.version = dict(attrs).get("content") or ""
        if tag == "a":
            self._links += 1
            if self._links > MAX_PAGE_LINKS:
                raise _Refused(f"a page of more than {MAX_PAGE_LINKS} links, past any index's")
            self._open = dict(attrs)
            self._text = []

    def check_for_whole_start_tag(self, i: int) -> int:
        """Where the start tag at `i` ends (-1: not in the page), asked before its
        attributes are read. The parser's own scan reads a copy of the page's next
        2 * MAX_TAG characters only (read whole, one tag of 15 million attributes took
        gigabytes), and a tag longer than MAX_TAG is refused; one left open at the end of
        the page (no > after it) ends the parse, as ever (see `_fed`)."""
        start, window = self._window
        if not start <= i < start + MAX_TAG or not window:  # each character copied twice
            start, window = self._window = (i, self.rawdata[i : i + 2 * MAX_TAG])
        page, self.rawdata = self.rawdata, window
        try:
            end = super().check_for_whole_start_tag(i - start)
        finally:
            self.rawdata = page
        if end < 0 and (start + len(window) >= len(page) or page.find(">", i) < 0):
            return end  # left open at the end of the page (no > after it)
        if end < 0 or end - (i - start) > MAX_TAG:
            raise _Refused(f"a tag of more than {MAX_TAG} characters")
        return start + end

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            text = "".join(self._text).strip()
            self.anchors.append(_Link.of(self._open, text))
            self._open = None
            self._files += text.endswith(DISTRIBUTION_SUFFIXES)  # a root page's links count none
            if self._files_at_most is not None and self._files > self._files_at_most:
                raise _Refused(_TOO_MANY)


def _fed(text: str, files_at_most: int | None = None) -> _AnchorParser:
    """The parser, fed the page `text`: its `<a>` elements (attributes and text, in page
    order) and its `<base href>`; ValueError past the page's bounds. The text is fed and
    never closed: at the end of its input, the parser of Python before 3.11.13
    (CPython gh-135462) reads each `<` of a tag left open as text and scans the rest of the
    page again from the next one, so a page of 8,000 `<a href='x'` took 32 s (quadratic); fed
    only, a tag left open ends the parse at its `<` after one scan, as the fixed parser
    ignores it: to the parser, the rest of the page is that tag's attributes."""
    parser = _AnchorParser(files_at_most)
    try:
        parser.feed(text)
    except _Refused as refused:
        raise ValueError(str(refused)) from None
    return parser


def _anchors(text: str) -> list[_Link]:
    """The `<a>` elements of a project page (at most MAX_PAGE_FILES files); ValueError for a
    page of a major version this reader does not know."""
    parser = _fed(text, MAX_PAGE_FILES)
    if parser.version is not None:
        _known_major(parser.version, "PEP 629 repository-version")
    return parser.anchors


def _known_major(version: object, what: str) -> None:
    """ValueError where a page says it is of an API major version other than 1: PEP 629
    and PEP 691 ask a client to stop there, not to read it as 1.x."""
    major = version.split(".", 1)[0].strip() if isinstance(version, str) else None
    if major != "1":
        raise ValueError(
            f"{what} {str(version)[:20]!r}: a major version this reader does not know (1.x)"
        )


def _json_meta(data: object) -> None:
    """ValueError where a PEP 691 page's meta names an api-version of another major."""
    meta = data.get("meta") if isinstance(data, dict) else None
    if isinstance(meta, dict) and "api-version" in meta:
        _known_major(meta["api-version"], "PEP 691 api-version")


_TOO_MANY = f"a project page of more than {MAX_PAGE_FILES} files, past any project's"


# the hash pip checks a link by: the first `#name=` or `&name=` of its fragment, up to the
# next & (pip/_internal/models/link.py): `#sha256=X&md5=Y` is sha256 X
_LINK_HASH = re.compile(r"[#&](sha1|sha224|sha256|sha384|sha512|md5)=([^&]*)")


def _digest(fragment: str, prefix: str = "sha256=") -> str | None:
    return fragment[len(prefix) :].lower() if fragment.startswith(prefix) else None


def _joined(page_url: str, link: object) -> str | None:
    return _resolved(page_url, link) if isinstance(link, str) and link else None


def _resolved(page_url: str, link: str) -> str:
    """`link` against the page's URL; a link too broken to join (`http://[::1`) as it is
    written, so that its one file fails to download instead of the whole page to parse."""
    try:
        return urljoin(page_url, link)
    except ValueError:
        return link


def _page_text(body: bytes, content_type: str) -> str:
    """A page's text in the charset its Content-Type names (UTF-8 by default, as pip reads
    it); ValueError for bytes that are not text in it."""
    message = Message()
    message["content-type"] = content_type
    charset = message.get_content_charset() or "utf-8"
    try:
        return body.decode(charset)
    except LookupError:
        raise ValueError(f"an unknown charset {charset[:40]!r}") from None
    except UnicodeDecodeError:
        raise ValueError(f"not {charset[:40]} text") from None


def html_files(text: str, page_url: str) -> list[ListedFile]:
    """Every link of a PEP 503 project page, in page order, a filename listed twice kept
    twice (the anchor text is the filename)."""
    out: list[ListedFile] = []
    for link in _anchors(text):
        href, name = link.href, link.text
        if not href or not name:
            continue
        url, fragment = urldefrag(_resolved(page_url, href))
        stated = _LINK_HASH.search("#" + fragment)
        hash_name, digest = stated.groups() if stated else (None, "")
        out.append(
            ListedFile(
                name=name,
                url=url,
                sha256=digest.lower() if hash_name == "sha256" else None,
                size=None,
                hash_name=hash_name,
                requires_python=link.requires_python,
                metadata_sha256=_digest(link.core_metadata or ""),
                provenance_url=_joined(page_url, link.provenance),
                yanked=link.yanked,
                digest=digest.lower() or None,
            )
        )
    return out


def parse_simple_html(text: str, page_url: str) -> dict[str, ListedFile]:
    """The files of a PEP 503 project page, by filename (the anchor text)."""
    return {listed.name: listed for listed in html_files(text, page_url)}


def json_files(data: object, page_url: str) -> list[ListedFile]:
    """Every file of a PEP 691 project page, in page order, a filename listed twice kept
    twice. Raises ValueError when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise ValueError("not a PEP 691 project page (no 'files' list)")
    _json_meta(data)
    if len(data["files"]) > MAX_PAGE_FILES:
        raise ValueError(_TOO_MANY)
    out: list[ListedFile] = []
    for raw in data["files"]:
        if not isinstance(raw, dict):
            raise ValueError("a 'files' entry is not an object")
        name, url, hashes = raw.get("filename"), raw.get("url"), raw.get("hashes")
        if not isinstance(name, str) or not isinstance(url, str) or not isinstance(hashes, dict):
            raise ValueError("a 'files' entry lacks filename, url or hashes")
        hash_name = "sha256" if "sha256" in hashes else next(iter(hashes), None)
        digest = hashes.get(hash_name) if hash_name is not None else None
        if hash_name is not None and not isinstance(digest, str):
            raise ValueError(f"{name[:120]!r}: its {hash_name[:40]!r} hash is not a string")
        sha256 = digest if hash_name == "sha256" else None
        size = raw.get("size")
        core = raw.get("core-metadata", raw.get("dist-info-metadata"))
        metadata = core.get("sha256") if isinstance(core, dict) else None
        requires = raw.get("requires-python")
        out.append(
            ListedFile(
                name=name,
                # as in html_files, and as pip reads it (`url_without_fragment`): a
                # `#sha256=` after the URL is not part of where the file is
                url=urldefrag(_resolved(page_url, url))[0],
                sha256=sha256.lower() if isinstance(sha256, str) else None,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                hash_name=hash_name,
                requires_python=requires if isinstance(requires, str) else None,
                metadata_sha256=metadata.lower() if isinstance(metadata, str) else None,
                provenance_url=_joined(page_url, raw.get("provenance")),
                yanked=bool(raw.get("yanked")),
                digest=digest.lower() if isinstance(digest, str) else None,
            )
        )
    return out


def parse_simple_json(data: object, page_url: str) -> dict[str, ListedFile]:
    """The files of a PEP 691 project page, by filename. Raises ValueError when malformed."""
    return {listed.name: listed for listed in json_files(data, page_url)}


def _json_document(body: bytes, values_at_most: int = MAX_PAGE_VALUES) -> object:
    try:
        return json_document(body, "the page", values_at_most=values_at_most)
    except UnreadableDocument as error:
        raise ValueError(f"not a PEP 691 project page ({error.reason})") from None


def form_of(content_type: str) -> str:
    """What form of a page a Content-Type says it is: "PEP 691 JSON" or "HTML"."""
    return "PEP 691 JSON" if _is_json(content_type) else "HTML"


def _is_json(content_type: str) -> bool:
    """Whether a page's Content-Type is PEP 691's JSON: a media type is matched in any case
    (RFC 9110), as pip matches it."""
    return content_type.split(";", maxsplit=1)[0].strip().lower() == SIMPLE_JSON


def parse_project_page(body: bytes, content_type: str, page_url: str) -> dict[str, ListedFile]:
    """A project page in whichever format the server chose; ValueError for any page that
    is not one (however deep, large or mistyped)."""
    return {listed.name: listed for listed in project_files(body, content_type, page_url)}


def project_files(body: bytes, content_type: str, page_url: str) -> list[ListedFile]:
    """`parse_project_page`'s files in page order, a filename listed twice kept twice."""
    if _is_json(content_type):
        return json_files(_json_document(body), page_url)
    return html_files(_page_text(body, content_type), page_url)


DISTRIBUTION_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz", ".egg")


@dataclass(frozen=True, kw_only=True)
class IndexPage:
    """A page of a simple index: a project page's files, or a root page's projects (name,
    project page URL)."""

    files: tuple[ListedFile, ...] = ()
    projects: tuple[tuple[str, str], ...] = ()
    root: bool = False


def parse_index_page(body: bytes, content_type: str, page_url: str) -> IndexPage:
    """A root page (PEP 691 `projects`; HTML whose links name no distribution file) or a
    project page; ValueError for JSON that is neither."""
    if _is_json(content_type):
        # a root page's values are its projects' (PyPI's lists 750,000): bounded as its
        # links are, where a key "projects" may be among them
        may_be_root = b'"projects"' in body
        data = _json_document(body, MAX_ROOT_VALUES if may_be_root else MAX_PAGE_VALUES)
        _json_meta(data)
        if isinstance(data, dict) and isinstance(data.get("projects"), list):
            names = [p.get("name") for p in data["projects"] if isinstance(p, dict)]
            return IndexPage(
                projects=tuple(
                    (name, project_page_url(page_url, name)) for name in names
                    if isinstance(name, str) and name
                ),
                root=True,
            )  # fmt: skip
        return IndexPage(files=tuple(json_files(data, page_url)))
    files = html_files(_page_text(body, content_type), page_url)
    if not files or any(f.name.endswith(DISTRIBUTION_SUFFIXES) for f in files):
        return IndexPage(files=tuple(files))
    return IndexPage(
        projects=tuple((f.name, f.url if f.url.endswith("/") else f.url + "/") for f in files),
        root=True,
    )


def page_links(text: str) -> tuple[list[str], str | None]:
    """Every link of a page as written (`href`, in page order), and its `<base href>`;
    ValueError past a page's bounds (MAX_PAGE_LINKS, MAX_TAG), as a served page's."""
    parser = _fed(text)
    return [link.href or "" for link in parser.anchors], parser.base


def root_html_projects(text: str) -> set[str]:
    """The projects a PEP 503 root page links, by canonical name: each link's last path
    segment (`sgl-deep-gemm/`), whatever its text says."""
    names = set()
    for link in _anchors(text):
        href = urldefrag(link.href or "")[0].rstrip("/")
        name = href.rsplit("/", 1)[-1]
        if name:
            names.add(str(canonicalize_name(name)))
    return names


def root_json_projects(body: bytes) -> set[str]:
    """The projects a PEP 691 root page lists, by canonical name; ValueError for a page that
    is not one."""
    try:
        data = json_document(body, "the page")
    except UnreadableDocument as error:
        raise ValueError(f"not a PEP 691 root page ({error.reason})") from None
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, list) or not all(
        isinstance(p, dict) and isinstance(p.get("name"), str) for p in projects
    ):
        raise ValueError("not a PEP 691 root page (no 'projects' list of names)")
    return {str(canonicalize_name(p["name"])) for p in projects}


def project_page_url(index_url: str, project: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"


def versions_listed(files: dict[str, ListedFile]) -> set[Version]:
    """The versions a project page lists files for (wheels and sdists)."""
    found: set[Version] = set()
    for name in files:
        try:
            if name.endswith(".whl"):
                found.add(WheelName.parse(name).version)
            else:
                found.add(parse_sdist_filename(name)[1])
        except (NotAWheel, InvalidSdistFilename):
            continue
    return found
