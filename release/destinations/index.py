"""The pip index of the GitHub-hosted variants: PEP 503 HTML and PEP 691 JSON.

The index is a function of everything published, never of one run: each destination kind
says what the index lists of it (`index_files`: every published release of a GitHub
repository, with each file's sha256, size, Requires-Python and PEP 658 metadata taken from
the published assets themselves). `render_index` is pure: from that full set it
renders one tree per local label (`cu129/index.html`, `cu129/<project>/index.html`,
`cu129/<project>/index.json`), plus the NCCL pins under `nccl/`. Links point at the files
where they are hosted (GitHub `browser_download_url`), carry `#sha256=`, an escaped
`data-requires-python`, and `data-core-metadata` / `data-dist-info-metadata` (PEP 658/714)
where the sidecar is hosted beside the file, and `data-provenance` / `provenance` (PEP 740)
where a provenance object that attests the file is hosted beside it. `write_index` swaps a
rendered tree into a directory atomically.
"""

from __future__ import annotations

import email.parser
import html
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from release.errors import FileError
from release.fsutil import current_umask, json_text, write_atomic
from release.wheelfile import NotAWheel, WheelName

API_VERSION = "1.3"  # 1.3: PEP 740's provenance links
METADATA_SUFFIX = ".metadata"


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    """One published wheel as the index lists it."""

    filename: str
    url: str  # where the bytes are hosted, without a fragment
    sha256: str
    size: int | None = None
    requires_python: str | None = None
    metadata_sha256: str | None = None  # set only when `<url>.metadata` is hosted too
    provenance_url: str | None = None  # its PEP 740 provenance object, checked to attest it

    @property
    def project(self) -> str:
        return WheelName.parse(self.filename).project

    @property
    def label(self) -> str | None:
        return WheelName.parse(self.filename).local_label


def index_problems(files: Sequence[IndexFile]) -> list[str]:
    """Why these files cannot form one index: bad names, a name twice with two hashes."""
    problems = []
    seen: dict[str, IndexFile] = {}
    for file in files:
        try:
            version = WheelName.parse(file.filename).version
        except NotAWheel as error:
            problems.append(f"{file.filename}: not a wheel filename ({error.detail})")
            continue
        if version.local is None:
            problems.append(f"{file.filename}: has no local label, so it belongs on PyPI")
        if len(file.sha256) != 64:
            problems.append(f"{file.filename}: sha256 {file.sha256!r} is not a hex digest")
        previous = seen.setdefault(file.filename, file)
        if previous.sha256 != file.sha256:
            problems.append(
                f"{file.filename}: listed twice with different sha256, "
                f"{previous.url} ({previous.sha256[:12]}...) and {file.url} "
                f"({file.sha256[:12]}...)"
            )
    return problems


def one_per_name(files: Iterable[IndexFile]) -> dict[str, IndexFile]:
    """`files` by filename, the first of each name kept: ValueError where a name is held
    with other bytes twice (`index_problems`), which no index can list truthfully (pip
    takes one file per name, and which one it got would be the host's choice). The same
    bytes held twice are listed once."""
    files = list(files)
    problems = index_problems(files)
    if problems:
        raise ValueError("; ".join(problems))
    unique: dict[str, IndexFile] = {}
    for file in files:
        unique.setdefault(file.filename, file)
    return unique


def _html_page(title: str, body: Iterable[str]) -> bytes:
    lines = [
        "<!DOCTYPE html>",
        "<html>",
        "  <head>",
        f'    <meta name="pypi:repository-version" content="{API_VERSION}">',
        f"    <title>{html.escape(title)}</title>",
        "  </head>",
        "  <body>",
        f"    <h1>{html.escape(title)}</h1>",
        *(f"    {line}" for line in body),
        "  </body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


def _anchor(file: IndexFile) -> str:
    attrs = [f'href="{html.escape(f"{file.url}#sha256={file.sha256}")}"']
    if file.requires_python:
        attrs.append(f'data-requires-python="{html.escape(file.requires_python)}"')
    if file.metadata_sha256:
        value = html.escape(f"sha256={file.metadata_sha256}")
        attrs.append(f'data-core-metadata="{value}"')
        attrs.append(f'data-dist-info-metadata="{value}"')
    if file.provenance_url:
        attrs.append(f'data-provenance="{html.escape(file.provenance_url)}"')
    return f"<a {' '.join(attrs)}>{html.escape(file.filename)}</a><br>"


def _json_file(file: IndexFile) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "filename": file.filename,
        "url": file.url,
        "hashes": {"sha256": file.sha256},
        "requires-python": file.requires_python,
        "yanked": False,
    }
    if file.size is not None:
        entry["size"] = file.size
    core: dict[str, str] | bool = (
        {"sha256": file.metadata_sha256} if file.metadata_sha256 else False
    )
    entry["core-metadata"] = core
    entry["dist-info-metadata"] = core
    if file.provenance_url:
        entry["provenance"] = file.provenance_url
    return entry


def project_page(project: str, files: Sequence[IndexFile]) -> tuple[bytes, bytes]:
    """The PEP 503 HTML and PEP 691 JSON project pages of `project` listing `files`, in
    filename order. Deterministic."""
    ordered = sorted(files, key=lambda f: f.filename)
    html_page = _html_page(f"Links for {project}", [_anchor(f) for f in ordered])
    versions = sorted({str(WheelName.parse(f.filename).version) for f in ordered})
    json_page = _json_bytes(
        {
            "meta": {"api-version": API_VERSION},
            "name": project,
            "versions": versions,
            "files": [_json_file(f) for f in ordered],
        }
    )
    return html_page, json_page


def root_page(title: str, projects: Sequence[str]) -> tuple[bytes, bytes]:
    """The PEP 503 HTML and PEP 691 JSON root pages listing `projects`."""
    names = sorted(projects)
    links = [f'<a href="{html.escape(quote(p))}/">{html.escape(p)}</a><br>' for p in names]
    return _html_page(title, links), _json_bytes(
        {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in names]}
    )


def render_index(
    files: Sequence[IndexFile], extra: Mapping[str, bytes] | None = None
) -> dict[str, bytes]:
    """Every file of the index tree, by relative path, with `extra` files (the NCCL pins)
    added as they are. Deterministic; raises ValueError on a set of files that cannot form
    an index (see `index_problems`)."""
    unique = one_per_name(files)
    by_label: dict[str, dict[str, list[IndexFile]]] = {}
    for file in unique.values():
        label = file.label or ""
        by_label.setdefault(label, {}).setdefault(file.project, []).append(file)
    out: dict[str, bytes] = {}
    for label in sorted(by_label):
        projects = by_label[label]
        root_html, root_json = root_page(f"Simple index ({label})", list(projects))
        out[f"{label}/index.html"] = root_html
        out[f"{label}/index.json"] = root_json
        for project, project_files in sorted(projects.items()):
            page_html, page_json = project_page(project, project_files)
            out[f"{label}/{project}/index.html"] = page_html
            out[f"{label}/{project}/index.json"] = page_json
    for relative, data in sorted((extra or {}).items()):
        out[relative] = data
    return out


def _json_bytes(data: object) -> bytes:
    return json_text(data, sort_keys=True).encode()


# --- Writing the tree. ---


PAGES = ("index.html", "index.json")
NCCL_DIR = "nccl"
# the most entries an index directory is looked through for one this tool never writes
_MAX_LOOKED_AT = 1_000_000


def is_index_path(relative: str) -> bool:
    """Whether `relative` (POSIX) is a file `render_index` with the NCCL pins writes: a root
    or label page, a project's page, or `nccl/<file>`."""
    parts = relative.split("/")
    if parts[0] == NCCL_DIR:
        return len(parts) == 2
    return len(parts) <= 3 and parts[-1] in PAGES


def is_flat_file(relative: str) -> bool:
    """Whether `relative` is a file directly in the directory (the companion files)."""
    return "/" not in relative


def foreign_entry(directory: Path, owned: Callable[[str], bool] = is_index_path) -> str | None:
    """What in `directory` was not written by `write_index` of a tree whose paths `owned`
    takes (a file of another path, a symbolic link, anything but a file or a folder), said
    in a few words naming it; None where it holds nothing else, or is not there. The
    directory itself a symbolic link is one too; nothing is followed."""
    if directory.is_symlink():
        return f"{directory} is a symbolic link"
    if not directory.exists():
        return None
    if not directory.is_dir():
        return f"{directory} is not a directory"
    pending = [(directory, "")]
    looked_at = 0
    while pending:
        folder, prefix = pending.pop()
        with os.scandir(folder) as listing:
            for entry in listing:
                looked_at += 1
                relative = f"{prefix}{entry.name}"
                if looked_at > _MAX_LOOKED_AT:
                    return f"{directory} holds more than {_MAX_LOOKED_AT:,} entries"
                if entry.is_symlink():
                    return f"{folder / entry.name} is a symbolic link"
                if entry.is_dir(follow_symlinks=False):
                    if not any(owned(f"{relative}/{name}") for name in (*PAGES, "x")):
                        return f"{folder / entry.name} is a folder no index has"
                    pending.append((Path(entry.path), f"{relative}/"))
                elif not entry.is_file(follow_symlinks=False) or not owned(relative):
                    return f"{folder / entry.name} is no file of an index"
                elif entry.name in PAGES and not _is_index_page(Path(entry.path)):
                    return f"{folder / entry.name} is no page of a simple index"
    return None


# what every page `render_index` writes holds near its start (PEP 503's meta tag, PEP 691's
# meta key): a site's own index.html, under a name an index's page has, has neither
_PAGE_MARKS = {
    "index.html": b'<meta name="pypi:repository-version"',
    "index.json": b'"api-version"',
}


def _is_index_page(path: Path) -> bool:
    """Whether the file at `path` (a regular file, named as a page) reads as a simple
    index's page: its mark within its first 4 KiB."""
    with path.open("rb") as handle:
        return _PAGE_MARKS[path.name] in handle.read(4096)


def write_index(
    tree: Mapping[str, bytes], directory: Path, *, owned: Callable[[str], bool] = is_index_path
) -> None:
    """Replace `directory` with exactly `tree`: built in a sibling temp dir, then swapped in,
    so a reader (or a crash) never sees half an index or a stale file from an older one.
    A directory holding anything but files `owned` takes (`foreign_entry`), or a symbolic
    link, is never replaced: FileError naming it (what is replaced is deleted)."""
    directory = Path(os.path.abspath(directory))  # the link itself, never where it leads
    problem = foreign_entry(directory, owned)
    if problem is not None:
        raise FileError(
            f"{problem}: release replaces the index directory whole",
            hint="give a new or empty directory, or one holding only an index release wrote",
        )
    try:
        _swapped_in(tree, directory)
    except OSError as error:  # a read-only or full disk, a parent that may not be written
        raise FileError(
            f"cannot write the index to {directory}: {error.strerror or error}",
            hint="give a directory release can write (--index-dir)",
        ) from None


def _swapped_in(tree: Mapping[str, bytes], directory: Path) -> None:
    """`tree` written into a sibling temporary directory, then swapped in for `directory`."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
    try:
        for relative, data in tree.items():
            target = staging / relative
            if not target.resolve().is_relative_to(staging.resolve()):
                raise ValueError(f"{relative}: outside the index directory")
            write_atomic(target, data)
        # mkdtemp makes it 0o700; the index is served to others
        os.chmod(staging, 0o777 & ~current_umask())
        old = None
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
            os.replace(directory, old)
        os.replace(staging, directory)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def requires_python_of(metadata: bytes) -> str | None:
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    value = headers.get("Requires-Python")
    return str(value) if value is not None else None
