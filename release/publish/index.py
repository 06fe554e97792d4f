"""The pip index of the GitHub-hosted variants: PEP 503 HTML and PEP 691 JSON, and reading one.

`render_index` is pure: from the FULL set of published files it renders one tree per local
label (`cu129/index.html`, `cu129/<project>/index.html`, `cu129/<project>/index.json`).
Links point at the files where they are hosted (GitHub `browser_download_url`), carry
`#sha256=`, an escaped `data-requires-python`, and `data-core-metadata` /
`data-dist-info-metadata` (PEP 658/714) when a `<file>.metadata` sidecar is hosted beside
the file. The index is always regenerated, never appended to, so a filename can appear
only once with one hash.

`parse_simple_html` / `parse_simple_json` read a project page of any simple index (PyPI,
pypiserver, ours) into `RemoteFile`s; `write_index` swaps a rendered tree into a directory
atomically; `commit_pages` puts it on a git branch for GitHub Pages.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from release.errors import PublishError
from release.publish.base import RemoteFile

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
SIMPLE_HTML = "application/vnd.pypi.simple.v1+html"
# Ask for PEP 691 JSON first; plain HTML (pypiserver, static hosting) is the fallback.
ACCEPT = f"{SIMPLE_JSON}, {SIMPLE_HTML};q=0.2, text/html;q=0.1"
API_VERSION = "1.1"


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    """One published wheel as the index lists it."""

    filename: str
    url: str  # where the bytes are hosted, without a fragment
    sha256: str
    size: int | None = None
    requires_python: str | None = None
    metadata_sha256: str | None = None  # set only when `<url>.metadata` is hosted too

    @property
    def project(self) -> str:
        return canonicalize_name(parse_wheel_filename(self.filename)[0])

    @property
    def label(self) -> str | None:
        return parse_wheel_filename(self.filename)[1].local


def index_problems(files: Sequence[IndexFile]) -> list[str]:
    """Why these files cannot form one index: bad names, a name twice with two hashes."""
    problems = []
    seen: dict[str, str] = {}
    for file in files:
        try:
            version = parse_wheel_filename(file.filename)[1]
        except InvalidWheelFilename as error:
            problems.append(f"{file.filename}: not a wheel filename ({error})")
            continue
        if version.local is None:
            problems.append(f"{file.filename}: has no local label, so it belongs on PyPI")
        if len(file.sha256) != 64:
            problems.append(f"{file.filename}: sha256 {file.sha256!r} is not a hex digest")
        previous = seen.setdefault(file.filename, file.sha256)
        if previous != file.sha256:
            problems.append(
                f"{file.filename}: listed twice with different sha256 "
                f"({previous[:12]}..., {file.sha256[:12]}...)"
            )
    return problems


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
    return entry


def render_index(files: Sequence[IndexFile]) -> dict[str, bytes]:
    """Every file of the index tree, by relative path. Deterministic; raises ValueError on a
    set of files that cannot form an index (see `index_problems`)."""
    problems = index_problems(files)
    if problems:
        raise ValueError("; ".join(problems))
    unique = {f.filename: f for f in files}
    by_label: dict[str, dict[str, list[IndexFile]]] = {}
    for file in unique.values():
        label = file.label or ""
        by_label.setdefault(label, {}).setdefault(file.project, []).append(file)
    out: dict[str, bytes] = {}
    for label in sorted(by_label):
        projects = by_label[label]
        root_links = [
            f'<a href="{html.escape(p)}/">{html.escape(p)}</a><br>' for p in sorted(projects)
        ]
        out[f"{label}/index.html"] = _html_page(f"Simple index ({label})", root_links)
        out[f"{label}/index.json"] = _json_bytes(
            {
                "meta": {"api-version": API_VERSION},
                "projects": [{"name": p} for p in sorted(projects)],
            }
        )
        for project, project_files in sorted(projects.items()):
            ordered = sorted(project_files, key=lambda f: f.filename)
            out[f"{label}/{project}/index.html"] = _html_page(
                f"Links for {project}", [_anchor(f) for f in ordered]
            )
            versions = sorted(
                {str(parse_wheel_filename(f.filename)[1]) for f in ordered},
            )
            out[f"{label}/{project}/index.json"] = _json_bytes(
                {
                    "meta": {"api-version": API_VERSION},
                    "name": project,
                    "versions": versions,
                    "files": [_json_file(f) for f in ordered],
                }
            )
    return out


def _json_bytes(data: object) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


# --- Reading a project page of any simple index. ---


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open = dict(attrs)
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
            self._open = None


def _digest(fragment: str, prefix: str = "sha256=") -> str | None:
    return fragment[len(prefix) :].lower() if fragment.startswith(prefix) else None


@dataclass(frozen=True, kw_only=True)
class ListedFile:
    """A file on a simple index page, with what PEP 503/658/691 say about it."""

    remote: RemoteFile
    hash_name: str | None  # the hash the link carries (sha256, md5, ...), if any
    requires_python: str | None
    metadata_sha256: str | None


def parse_simple_html(text: str, page_url: str) -> dict[str, ListedFile]:
    """The files of a PEP 503 project page, by filename (the anchor text)."""
    parser = _AnchorParser()
    parser.feed(text)
    parser.close()
    out: dict[str, ListedFile] = {}
    for attrs, name in parser.anchors:
        href = attrs.get("href")
        if not href or not name:
            continue
        url, fragment = urldefrag(urljoin(page_url, href))
        hash_name = fragment.split("=", 1)[0] if "=" in fragment else None
        core = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata") or ""
        out[name] = ListedFile(
            remote=RemoteFile(name=name, size=None, sha256=_digest(fragment), url=url),
            hash_name=hash_name,
            requires_python=attrs.get("data-requires-python"),
            metadata_sha256=_digest(core),
        )
    return out


def parse_simple_json(data: object, page_url: str) -> dict[str, ListedFile]:
    """The files of a PEP 691 project page, by filename. Raises ValueError when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise ValueError("not a PEP 691 project page (no 'files' list)")
    out: dict[str, ListedFile] = {}
    for raw in data["files"]:
        if not isinstance(raw, dict):
            raise ValueError("a 'files' entry is not an object")
        name, url, hashes = raw.get("filename"), raw.get("url"), raw.get("hashes")
        if not isinstance(name, str) or not isinstance(url, str) or not isinstance(hashes, dict):
            raise ValueError("a 'files' entry lacks filename, url or hashes")
        sha256 = hashes.get("sha256")
        size = raw.get("size")
        core = raw.get("core-metadata", raw.get("dist-info-metadata"))
        metadata = core.get("sha256") if isinstance(core, dict) else None
        requires = raw.get("requires-python")
        out[name] = ListedFile(
            remote=RemoteFile(
                name=name,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                sha256=sha256.lower() if isinstance(sha256, str) else None,
                url=urljoin(page_url, url),
            ),
            hash_name="sha256" if isinstance(sha256, str) else next(iter(hashes), None),
            requires_python=requires if isinstance(requires, str) else None,
            metadata_sha256=metadata if isinstance(metadata, str) else None,
        )
    return out


def parse_project_page(body: bytes, content_type: str, page_url: str) -> dict[str, ListedFile]:
    """A project page in whichever format the server chose."""
    if content_type.split(";", maxsplit=1)[0].strip() == SIMPLE_JSON:
        return parse_simple_json(json.loads(body), page_url)
    return parse_simple_html(body.decode("utf-8", errors="replace"), page_url)


def project_page_url(index_url: str, project: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"


# --- Writing the tree. ---


def write_index(tree: Mapping[str, bytes], directory: Path) -> None:
    """Replace `directory` with exactly `tree`: built in a sibling temp dir, then swapped in,
    so a reader (or a crash) never sees half an index or a stale file from an older one."""
    directory = directory.resolve()
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
    try:
        for relative, data in tree.items():
            target = staging / relative
            if not target.resolve().is_relative_to(staging.resolve()):
                raise ValueError(f"{relative}: outside the index directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        # mkdtemp makes it 0o700; the index is served to others
        os.chmod(staging, 0o755)  # noqa: S103
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


def _git(repo: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["git", *args] if cwd else ["git", "-C", str(repo), *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise PublishError(
            f"git {args[0]} failed in {repo}: {tail[0]}",
            hint="--pages-repo must be a git repository you can commit to",
        )
    return proc.stdout.strip()


def commit_pages(
    directory: Path,
    *,
    repo: Path,
    branch: str,
    message: str,
    environ: Mapping[str, str],
    push_remote: str | None = None,
) -> str:
    """Commit the index tree in `directory` as the whole content of `branch` in `repo`
    (without touching its working tree or index), optionally push it; return the commit."""
    git_dir = _git(repo, ["rev-parse", "--absolute-git-dir"], environ)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **environ,
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_DIR": git_dir,
            "GIT_WORK_TREE": str(directory.resolve()),
        }
        _git(repo, ["add", "--all", "--force", "."], env, cwd=directory.resolve())
        tree = _git(repo, ["write-tree"], env, cwd=directory.resolve())
        parent = subprocess.run(
            # git from PATH, as the user runs it
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],  # noqa: S607
            env=dict(environ),
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if parent and _git(repo, ["rev-parse", f"{parent}^{{tree}}"], environ) == tree:
            commit = parent
        else:
            parents = ["-p", parent] if parent else []
            commit = _git(repo, ["commit-tree", tree, *parents, "-m", message], environ)
            _git(repo, ["update-ref", f"refs/heads/{branch}", commit], environ)
    if push_remote:
        _git(repo, ["push", push_remote, f"refs/heads/{branch}:refs/heads/{branch}"], environ)
    return commit
