"""The nightly channel's pages (release.nightly.layout says where each goes): a
commit's project pages, the /nightly/ ones, and the /nightly/ root pages, each one object.

Links are relative (`../../<commit>/<wheel>#sha256=...`), so the pages work under whatever
host serves the prefix, and a /nightly/ page links the immutable files of its commit: no
page links a file that is not uploaded, and moving /nightly/ copies no wheel. Every link
carries `#sha256=`, the `.metadata` digest (PEP 658/714) and Requires-Python, rendered by
release.destinations.index (PEP 503 HTML and PEP 691 JSON).

Pure: page bytes and headers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from release.destinations.index import IndexFile, project_page, root_page
from release.nightly.layout import (
    HTML_TYPE,
    IMMUTABLE,
    JSON_PAGE,
    NIGHTLY_DIR,
    NO_CACHE,
    commit_dir,
    label_dir,
    label_of,
    link,
    page_dir,
)
from release.nightly.state import NightlyFile
from release.remote.simple_index import SIMPLE_JSON


@dataclass(frozen=True, kw_only=True)
class Page:
    """One index page object: its key under the bucket, bytes and headers."""

    key: str
    body: bytes
    content_type: str
    cache_control: str

    @property
    def md5(self) -> str:
        """The ETag S3, R2 and MinIO give a single PUT of these bytes."""
        return hashlib.md5(self.body, usedforsecurity=False).hexdigest()


def project_pages(
    *,
    prefix: str,
    directory: str,
    commit: str,
    project: str,
    files: Sequence[NightlyFile],
    cache_control: str,
) -> list[Page]:
    """The HTML and JSON project pages, one pair per variant, of `files` (a commit's), at
    `directory` (`<commit>/` or `nightly/`)."""
    pages = []
    for label in sorted({label_of(f.filename) for f in files}):
        where = page_dir(directory, label, project)
        listed = [
            IndexFile(
                filename=f.filename,
                url=link(where, commit, f.filename),
                sha256=f.sha256,
                size=f.size,
                requires_python=f.requires_python,
                metadata_sha256=f.metadata_sha256,
            )
            for f in files
            if label_of(f.filename) == label
        ]
        html_page, json_page = project_page(canonicalize_name(project), listed)
        pages.append(Page(key=prefix + where, body=html_page, content_type=HTML_TYPE,
                          cache_control=cache_control))  # fmt: skip
        pages.append(Page(key=prefix + where + JSON_PAGE, body=json_page,
                          content_type=SIMPLE_JSON, cache_control=cache_control))  # fmt: skip
    return pages


def commit_pages(
    prefix: str, commit: str, project: str, files: Sequence[NightlyFile]
) -> list[Page]:
    return project_pages(
        prefix=prefix,
        directory=commit_dir(commit),
        commit=commit,
        project=project,
        files=files,
        cache_control=IMMUTABLE,
    )


def nightly_pages(
    prefix: str, commit: str, project: str, files: Sequence[NightlyFile]
) -> list[Page]:
    return project_pages(
        prefix=prefix,
        directory=NIGHTLY_DIR,
        commit=commit,
        project=project,
        files=files,
        cache_control=NO_CACHE,
    )


def root_pages(prefix: str, project: str, labels: Sequence[str]) -> list[Page]:
    """The /nightly/ root pages (PEP 503 and 691) of each variant: the project's name."""
    pages = []
    for label in labels:
        where = f"{NIGHTLY_DIR}{label_dir(label)}"
        title = f"Nightly index ({label})" if label else "Nightly index"
        html_page, json_page = root_page(title, [canonicalize_name(project)])
        pages.append(Page(key=prefix + where, body=html_page, content_type=HTML_TYPE,
                          cache_control=NO_CACHE))  # fmt: skip
        pages.append(Page(key=prefix + where + JSON_PAGE, body=json_page,
                          content_type=SIMPLE_JSON, cache_control=NO_CACHE))  # fmt: skip
    return pages
