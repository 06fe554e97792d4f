"""The pure core of a pip index committed to a git repository (release.remote.gitindex runs
git): what a project's pages change on the branch, writing or deleting nothing that is not
the project's own.

`merge_pages` takes this project's pages (release.destinations.index's `render_index` tree,
read by `PackagePages.from_rendered`), the files the branch holds under the directory and the
root pages among them, and says what to write and delete. This project's folder of each
label it has pages for is replaced whole (never appended to); the root page of that label is
rewritten, in the caller's format, only where it does not list exactly the project folders
the label holds, so that it stays in sync; nothing else is ever written or deleted: other
projects' pages, other labels, the directory's own landing page and every file outside the
directory stay as they are, byte for byte.
"""

from __future__ import annotations

from codecs import BOM_UTF16_BE, BOM_UTF16_LE, BOM_UTF32_BE, BOM_UTF32_LE
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import InvalidName, canonicalize_name

from release.fsutil import LONE_SURROGATE
from release.remote.simple_index import page_links, root_json_projects

ROOT_HTML = "index.html"
ROOT_JSON = "index.json"
PROJECT_PAGES = (ROOT_HTML, ROOT_JSON)  # the files of a project's folder that are written
# The pages of one label's root, given the project folders it holds: files by name
# (index.html, and index.json where the caller writes PEP 691 too).
RootPages = Callable[[str, Sequence[str]], Mapping[str, bytes]]


# --- The core: pages in, the change out. ---


def _segment_problem(name: str) -> str | None:
    if not name or name in {".", ".."} or name.startswith(".git") or "/" in name or "\\" in name:
        return f"{name!r} cannot be a folder of an index"
    return None


@dataclass(frozen=True, kw_only=True)
class PackagePages:
    """One project's pages of an index: for each local label, the files of its folder
    `<label>/<project>/` (index.html, index.json)."""

    project: str  # canonical: the folder's name
    pages: Mapping[str, Mapping[str, bytes]]  # label -> file name -> bytes

    @classmethod
    def from_rendered(cls, tree: Mapping[str, bytes], project: str) -> PackagePages:
        """This project's pages from a rendered index tree (`<label>/<project>/<file>`);
        its label roots are left out (`merge_pages` keeps each in sync with its folder).
        ValueError for any other file, or one of another project: a shared index takes
        a project's own pages only."""
        name = str(canonicalize_name(project))
        pages: dict[str, dict[str, bytes]] = {}
        for path, data in sorted(tree.items()):
            parts = path.split("/")
            if len(parts) == 2 and parts[1] in (ROOT_HTML, ROOT_JSON):
                continue
            if len(parts) != 3 or parts[1] != name:
                raise ValueError(f"{path}: not a page of {name} under a label's folder")
            problem = _segment_problem(parts[0]) or _segment_problem(parts[2])
            if problem is not None:
                raise ValueError(f"{path}: {problem}")
            pages.setdefault(parts[0], {})[parts[2]] = data
        if not pages:
            raise ValueError(f"no page of {name} to publish")
        return cls(project=name, pages=pages)


def commit_message(pages: PackagePages, version: str) -> str:
    """The commit's message: the project, its version and the labels it lists, as
    sgl-project's own scripts name theirs (`update sgl-deep-gemm whl index for v0.1.4`)."""
    return f"{pages.project} {version}: index pages ({', '.join(sorted(pages.pages))})"


@dataclass(frozen=True, kw_only=True)
class IndexChange:
    """What one publish does to the branch: paths from the repository's root."""

    writes: Mapping[str, bytes]
    deletes: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return (*sorted(self.writes), *self.deletes)


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


# the files that make a folder of a label a project's page (PEP 503 HTML, as a static host
# serves a directory; PEP 691 JSON alone)
_PROJECT_PAGES = (ROOT_HTML, "index.htm", ROOT_JSON)


def _projects_in(
    listing: Collection[str], others: Mapping[str, str], label_dir: str
) -> dict[str, str]:
    """The project folders of a label's folder, canonical name -> folder name: those holding
    a page (_PROJECT_PAGES), and another project's alias (a symlink: `zeta -> ../cu129/zeta`).
    A folder whose name is no project's name (PEP 508: `a#b`, `sp ace`) is no project's."""
    prefix = label_dir + "/" if label_dir else ""
    found: dict[str, str] = {}
    for path in sorted([*listing, *(p for p, kind in others.items() if kind == "a symlink")]):
        rest = path[len(prefix) :] if path.startswith(prefix) else None
        if rest is None:
            continue
        parts = rest.split("/")
        paged = len(parts) == 2 and parts[1] in _PROJECT_PAGES
        if paged or (len(parts) == 1 and others.get(path) == "a symlink"):
            try:
                name = str(canonicalize_name(parts[0], validate=True))
            except InvalidName:
                continue
            found.setdefault(name, parts[0])
    return found


# links that name no page (a root page may hold them beside its projects')
_NOT_PAGES = ("javascript:", "mailto:", "data:", "#")
_HERE = "http://label.invalid/here/"  # a label's root, to read its relative links against


def _decoded(data: bytes) -> str:
    """A page's text: by its byte order mark where it has one (UTF-16, UTF-32), else UTF-8."""
    for mark, codec in ((BOM_UTF32_LE, "utf-32"), (BOM_UTF32_BE, "utf-32"),
                        (BOM_UTF16_LE, "utf-16"), (BOM_UTF16_BE, "utf-16")):  # fmt: skip
        if data.startswith(mark):
            return data.decode(codec, errors="replace")
    return data.decode("utf-8-sig", errors="replace")


# a root page's folders its links name, and its links to pages elsewhere (root_links)
RootLinks = tuple[set[str], list[str]]


def root_links(data: bytes) -> RootLinks:
    """A label's root page: the folders beside it its links name, as written (`K3_Kernels`
    of `./K3_Kernels/`), and its links to pages elsewhere, as written: another host, an
    absolute path, a folder above or deeper (after the percent-decoding and backslashes a
    browser reads: `%2e%2e/x/`, `\\\\host\\x`), or any link under a `<base href>`."""
    links, base = page_links(_decoded(data))
    folders: set[str] = set()
    elsewhere: list[str] = []
    for href in links:
        read = unquote(href.strip()).replace("\\", "/")
        if not read or read.lower().startswith(_NOT_PAGES):
            continue
        resolved = urlsplit(urljoin(_HERE, read))
        here = urlsplit(_HERE)
        rest = resolved.path.removeprefix(here.path)
        if (
            base is None
            and (resolved.scheme, resolved.netloc) == (here.scheme, here.netloc)
            and resolved.path.startswith(here.path)
        ):
            name = rest.removesuffix(ROOT_HTML).rstrip("/")
            if "/" not in name:
                if name:  # "" is the root itself
                    folders.add(name)
                continue
        elsewhere.append(href)
    return folders, elsewhere


def _root_links(path: str, read: Mapping[str, bytes]) -> RootLinks | None:
    """The `root_links` of the page at `path` on the branch, None where there is none;
    ValueError naming it where it is past what a page may hold."""
    if path not in read:
        return None
    try:
        return root_links(read[path])
    except ValueError as error:
        raise ValueError(f"{path} on the branch is not a page release can read: {error}") from None


def _listed_elsewhere(html: str, links: RootLinks | None) -> str | None:
    """Links of a label's root page `html` to pages elsewhere (`links`: its root_links,
    None where there is no such page), which rewriting the root to list the label's folders
    would drop; None where there is none. A link to a folder the label no longer holds is
    stale, and goes."""
    elsewhere = links[1] if links is not None else []
    if not elsewhere:
        return None
    shown = ", ".join(repr(h[:80]) for h in elsewhere[:3]) + (" ..." if len(elsewhere) > 3 else "")
    return (
        f"{html} links {shown}, a page elsewhere: rewriting it to list the label's folders "
        "would drop that link"
    )


def pages_to_read(listing: Collection[str], pages: PackagePages, directory: str) -> list[str]:
    """The files `merge_pages` reads: the root pages of the labels it writes, where the
    branch has them."""
    return sorted(
        path
        for label in pages.pages
        for path in (_join(directory, label, ROOT_HTML), _join(directory, label, ROOT_JSON))
        if path in listing
    )


def _root_in_sync(
    links: RootLinks | None, read: Mapping[str, bytes], json: str, holds: Mapping[str, str]
) -> bool:
    """Whether a label's root pages (those there are: `links`, the HTML page's root_links)
    link exactly the folders it holds, by their names as written (a host serves
    `K3_Kernels/` and `k3-kernels/` apart)."""
    if links is None or links[0] != set(holds.values()):
        return False
    if json not in read:
        return True
    try:
        return root_json_projects(read[json]) == set(holds)
    except ValueError:
        return False


def merge_pages(
    listing: Collection[str],
    read: Mapping[str, bytes],
    pages: PackagePages,
    *,
    directory: str,
    root_pages: RootPages,
    others: Mapping[str, str] | None = None,
) -> IndexChange:
    """The change that puts `pages` into a branch whose files are `listing` (paths from the
    repository's root; `read` holds the bytes of those `pages_to_read` names): this
    project's folder of each of its labels replaced whole, and that label's root rewritten
    by `root_pages` where it does not list exactly the project folders the label will hold.
    Nothing else is written or deleted: ValueError where an entry of the branch that is not
    this project's (a file, a symlink or a submodule in `others`: path -> what it is, or a
    folder) stands where a page or a folder of one goes, which writing would replace."""
    if any(p == ".." or p.startswith(".git") for p in PurePosixPath(directory).parts):
        raise ValueError(f"{directory!r}: not a directory inside the repository")
    writes: dict[str, bytes] = {}
    deletes: list[str] = []
    for label, files in sorted(pages.pages.items()):
        label_dir = _join(directory, label)
        folder = _join(label_dir, pages.project)
        for name, data in sorted(files.items()):
            writes[_join(folder, name)] = data
        entries = [*listing, *(others or {})]
        deletes += sorted(p for p in entries if p.startswith(folder + "/") and p not in writes)
        holds = {**_projects_in(listing, others or {}, label_dir), pages.project: pages.project}
        html, json = _join(label_dir, ROOT_HTML), _join(label_dir, ROOT_JSON)
        links = _root_links(html, read)  # one parse of a big page
        if not _root_in_sync(links, read, json, holds):
            dropped = _listed_elsewhere(html, links)
            if dropped is not None:
                raise ValueError(dropped)
            for name, data in root_pages(label, sorted(holds.values())).items():
                writes[_join(label_dir, name)] = data
    unnamed = next((p for p in deletes if LONE_SURROGATE.search(p)), None)
    if unnamed is not None:  # git would take it, but no log or message could say its name
        raise ValueError(f"{unnamed!r} in this project's folder: its name is not UTF-8")
    change = IndexChange(writes=writes, deletes=tuple(deletes))
    own = [_join(directory, label, pages.project) for label in pages.pages]
    blocked = _in_the_way(listing, others or {}, change, own)
    if blocked is not None:
        raise ValueError(blocked)
    return change


def _in_the_way(
    listing: Collection[str], others: Mapping[str, str], change: IndexChange, own: Sequence[str]
) -> str | None:
    """Why writing `change` would replace an entry that is not this project's (in its own
    folders `own`, everything is replaced whole): a file, symlink or submodule where a
    folder of a written page goes, or anything under a path a page is written to."""
    entries = {**dict.fromkeys(listing, "a file"), **others}

    def ours(path: str) -> bool:
        return any(path == folder or path.startswith(folder + "/") for folder in own)

    for path in sorted(change.writes):
        if path in others and not ours(path):
            return f"{path} is {others[path]} on the branch: writing it would replace it"
        parts = path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in entries and not ours(above):
                return (
                    f"{above} is {entries[above]} on the branch, where the index's folder "
                    f"{above}/ goes: writing {path} would replace it"
                )
        below = next((p for p in entries if p.startswith(path + "/") and not ours(p)), None)
        if below is not None:
            return (
                f"{path} is a folder on the branch (it holds {below}): writing it would replace it"
            )
    return None
